package shardwheel_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goFence matches a Go code block of a Markdown file.
var goFence = regexp.MustCompile("(?s)```go\n(.*?)```")

// readmeFrame is what one of README.md's Go snippets needs to compile and
// run: the function it becomes the body of, and the code that calls that
// function and checks what it did. The snippet's text is README's own,
// read from the file; the frame only names its free variables.
type readmeFrame struct {
	// marker is text that the snippet, and no other, contains.
	marker string
	// name and sig are the function's name and signature; ret is what
	// follows the snippet in its body: a return the snippet leaves out.
	name, sig, ret string
	// run calls the function and panics unless it did what README says.
	run string
}

// readmeFrames frame README.md's snippets, whatever their order. A snippet
// with no frame, or a frame with no snippet, fails the test.
var readmeFrames = []readmeFrame{
	{
		marker: "req.Fail(errTimedOut)",
		name:   "quickStart",
		sig:    "(req *request, conn *clientConn) error",
		ret:    "return nil",
		run: `req := &request{response: make(chan string, 1), failed: make(chan error, 1)}
			req.response <- "200 OK"
			must(quickStart(req, &clientConn{}))`,
	},
	{
		marker: "streams.AfterFunc(key,",
		name:   "streamTimeout",
		sig:    "(streams *shardwheel.Index[streamKey], conn *clientConn, streamID uint32, delay time.Duration) (bool, error)",
		run: `s := newScheduler()
			defer s.Stop()
			streams := shardwheel.NewIndex[streamKey](s)
			a := &clientConn{ID: 1, failed: make(chan uint32, 1)}
			b := &clientConn{ID: 2, failed: make(chan uint32, 1)}
			// Stream 1 on both connections: two keys, two timers.
			if _, err := streams.AfterFunc(streamKey{a.ID, 1}, time.Millisecond, func() { a.FailStream(1) }); err != nil {
				panic(err)
			}
			cancelled, err := streamTimeout(streams, b, 1, time.Hour)
			must(err)
			check(cancelled, "b's stream 1 was not cancelled")
			check(<-a.failed == 1, "a's stream 1 did not time out")`,
	},
	{
		marker: "s.NewHandler(failRequest)",
		name:   "handlers",
		sig:    "(s *shardwheel.Scheduler, failRequest func(uint64), requestID uint64) error",
		ret:    "return nil",
		run: `s := newScheduler()
			defer s.Stop()
			must(handlers(s, func(uint64) { panic("cancelled, yet it ran") }, 7))
			check(s.Pending() == 0, "the handler's timer is still pending")`,
	},
	{
		marker: "s.WithTimeout(r.Context(),",
		name:   "deadlines",
		sig:    "(s *shardwheel.Scheduler, proxy http.Handler, w http.ResponseWriter, r *http.Request)",
		run: `s := newScheduler()
			defer s.Stop()
			var cause error
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				cause = context.Cause(r.Context())
			})
			deadlines(s, slow, httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			check(errors.Is(cause, context.DeadlineExceeded), fmt.Sprint("the request ended with ", cause))`,
	},
	{
		marker: "s.Every(30*time.Second,",
		name:   "connTimers",
		sig:    "(ctx context.Context, s *shardwheel.Scheduler, conn *clientConn) error",
		run: `s := newScheduler()
			defer s.Stop()
			must(connTimers(context.Background(), s, &clientConn{ID: 1}))
			check(s.Pending() == 0, "the connection's timers are still pending")`,
	},
}

// readmePrelude is the program's part that no snippet shows: the types
// and helpers the snippets and frames use.
const readmePrelude = `package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/shardwheel/shardwheel"
)

var (
	_ = context.Background
	_ = errors.Is
	_ = fmt.Sprint
	_ http.Handler
	_ = httptest.NewRecorder
	_ = time.Second
)

// errTimedOut is what a request whose timeout ran fails with.
var errTimedOut = errors.New("request timed out")

// request is a proxied request: its response, or its failure.
type request struct {
	response chan string
	failed   chan error
}

// Fail fails the request, at most once.
func (r *request) Fail(err error) {
	select {
	case r.failed <- err:
	default:
	}
}

// clientConn is a multiplexed connection whose streams number from 1.
type clientConn struct {
	ID     uint64
	failed chan uint32
}

func (c *clientConn) FailStream(streamID uint32) { c.failed <- streamID }

// streamKey names a stream of a connection.
type streamKey struct{ conn, stream uint64 }
func (c *clientConn) Close()                     {}
func (c *clientConn) Ping()                      {}

func newScheduler() *shardwheel.Scheduler {
	s, err := shardwheel.New()
	must(err)
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func check(ok bool, what string) {
	if !ok {
		panic(what)
	}
}
`

// TestReadmeSnippetsCompile compiles README.md's Go snippets, each as the
// body of its frame's function, into a program built against this
// checkout (a module of its own in a temporary directory, whose go.mod
// replaces shardwheel with the repository), and runs it: every snippet
// runs and does what README says it does. A snippet that does not compile,
// or a README that shows code this test does not know, fails it.
func TestReadmeSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program: not with -short")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	snippets := goFence.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, snippets, "README.md has no Go snippet")

	var prog strings.Builder
	prog.WriteString(readmePrelude)
	framed := map[int]bool{}
	for _, m := range snippets {
		var match []int
		for i, f := range readmeFrames {
			if strings.Contains(m[1], f.marker) {
				match = append(match, i)
			}
		}
		require.Len(t, match, 1, "README.md's snippet needs exactly one frame in readmeFrames (it matches %d):\n%s", len(match), m[1])
		i := match[0]
		require.False(t, framed[i], "two of README.md's snippets contain %q", readmeFrames[i].marker)
		framed[i] = true
		f := readmeFrames[i]
		fmt.Fprintf(&prog, "\nfunc %s%s {\n%s\n%s}\n", f.name, f.sig, m[1], f.ret)
	}
	prog.WriteString("\nfunc main() {\n")
	for i, f := range readmeFrames {
		require.True(t, framed[i], "no snippet of README.md contains %q: its frame is stale", f.marker)
		fmt.Fprintf(&prog, "\tfunc() {\n\t\t\t%s\n\t}()\n\tfmt.Println(\"ok\", %q)\n", f.run, f.name)
	}
	prog.WriteString("}\n")

	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	goMod := fmt.Sprintf("module readmecheck\n\ngo 1.26.0\n\nrequire github.com/shardwheel/shardwheel v0.0.0\n\nreplace github.com/shardwheel/shardwheel => %s\n", root)
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog.String()), 0o644))

	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds README's snippets")
	cmd := exec.Command(goCmd, "run", ".")
	cmd.Dir = dir
	// Its own module: no workspace, and the requirements of shardwheel's
	// go.mod filled in (from the module cache the test's build used).
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "README.md's snippets, framed as %s/main.go, do not build or run:\n%s\nthe program:\n%s", dir, out, numbered(prog.String()))
	for _, f := range readmeFrames {
		require.Contains(t, string(out), "ok "+f.name, "the program did not run %s", f.name)
	}
}

// numbered returns src with line numbers, for reading a compiler's errors.
func numbered(src string) string {
	lines := strings.Split(src, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d  %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}
