module github.com/shardwheel/shardwheel

go 1.26.0

require (
	github.com/felixge/fgprof v0.9.5
	github.com/google/pprof v0.0.0-20240227163752-401108e1b7e7
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
