package shard

// A goroutine token identifies a live goroutine cheaply: CancelWait must
// tell whether it is called from inside the very task it would wait for
// (which would wait forever), and with an executor that task may run on
// any goroutine, so every run records the token of the goroutine running
// it. GoroutineID costs microseconds (it formats a stack trace), far too
// much per run; on amd64, arm64 and 386 the token is the runtime's g
// pointer, read from the thread-local slot or the g register
// (gtoken_*.s), which is unique among live goroutines and constant
// through a goroutine's life. Elsewhere it is
// GoroutineID, plus one so that no token is 0 (gtoken_other.go).
