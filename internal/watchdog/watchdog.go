// Package watchdog reports, a little before go test's -timeout (10
// minutes by default) kills a test binary, how long the package's tests
// have run, which tests are still running and what each waits for, and
// what to do on a slow host. A package with long tests calls Main from its
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(watchdog.Main(m)) }
//
// go test's own timeout panic comes a minute later with every goroutine's
// stack; the report says first, in a few lines, whether the tests are
// stuck or the host is slow.
package watchdog

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs m's tests, with the watchdog armed to report to stderr when
// they have run for all but a tenth (at most a minute) of go test's
// -timeout, and returns m.Run's exit code. Without a timeout (-timeout 0)
// it arms nothing.
func Main(m *testing.M) int {
	flag.Parse()
	timeout := testTimeout()
	if after := fireAfter(timeout); after > 0 {
		start := time.Now()
		t := time.AfterFunc(after, func() { Report(os.Stderr, packageDir(), time.Since(start), timeout) })
		defer t.Stop()
	}
	return m.Run()
}

// fireAfter returns when the watchdog reports for a test binary with
// the given -timeout: a tenth of it, at most a minute, before; 0 for no
// timeout.
func fireAfter(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	return timeout - min(timeout/10, time.Minute)
}

// testTimeout returns go test's -timeout, as the test binary's
// -test.timeout flag holds it, or 0 if it has none.
func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := f.Value.(flag.Getter).Get().(time.Duration)
	return d
}

// packageDir names the package under test: the test binary's name less
// ".test", and the directory go test runs it in.
func packageDir() string {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	if wd, err := os.Getwd(); err == nil {
		return fmt.Sprintf("package %s in %s", name, wd)
	}
	return "package " + name
}

// Report writes to w that the tests of pkg have run for elapsed of the
// timeout, a line for each test still running (its function, its
// goroutine's state and how long it has been in it, and where it waits),
// what to do, and the stacks of those tests' goroutines.
func Report(w io.Writer, pkg string, elapsed, timeout time.Duration) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	tests := runningTests(buf)
	var b strings.Builder
	fmt.Fprintf(&b, "\nwatchdog: the tests of %s have run for %v; go test's -timeout of %v stops them in %v.\n",
		pkg, round(elapsed), timeout, round(timeout-elapsed))
	if len(tests) == 0 {
		b.WriteString("watchdog: no test is running (TestMain or a test's cleanup is).\n")
	} else {
		b.WriteString("watchdog: running now:\n")
	}
	for _, t := range tests {
		fmt.Fprintf(&b, "  %s: %s, in %s", t.name, t.state, t.top)
		if t.at != "" {
			fmt.Fprintf(&b, ", at %s", t.at)
		}
		b.WriteString("\n")
	}
	b.WriteString("watchdog: a test waiting for minutes is stuck: its stack follows. If they are only slow (a busy or\n" +
		"  small host runs the race detector's tests several times slower), give them longer:\n" +
		"  go test -race -timeout 30m ./... (or -p 1 to run one package at a time; -short for smaller loads).\n")
	for _, t := range tests {
		b.WriteString("\n")
		b.WriteString(t.stack)
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// round rounds d for people: to the second from a minute up, else to a
// tenth of a second.
func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// test is a test function's goroutine in a stack dump.
type test struct {
	name  string // the test's function: TestX, or TestX.func1 for a subtest
	state string // its goroutine's state: "chan receive, 5 minutes"
	top   string // the function it is in: sync.(*WaitGroup).Wait
	at    string // the innermost line of a _test.go file on its stack
	stack string
}

// runningTests finds, in a dump of every goroutine's stack
// (runtime.Stack), the goroutines that run a test function: those
// started by testing.tRunner, the test's function next above it.
func runningTests(dump []byte) []test {
	var out []test
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		lines := strings.Split(strings.TrimSpace(string(g)), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "goroutine ") {
			continue
		}
		var funcs, files []string // frames, innermost first
		for i := 1; i+1 < len(lines); i += 2 {
			funcs = append(funcs, lines[i])
			files = append(files, strings.TrimSpace(lines[i+1]))
		}
		for k, f := range funcs {
			if !strings.HasPrefix(f, "testing.tRunner(") || k == 0 || strings.HasPrefix(funcs[k-1], "testing.") {
				continue
			}
			t := test{name: testName(funcs[k-1]), top: shortFunc(funcs[0]), stack: strings.Join(lines, "\n")}
			if open, end := strings.IndexByte(lines[0], '['), strings.LastIndexByte(lines[0], ']'); open >= 0 && end > open {
				t.state = lines[0][open+1 : end]
			}
			for _, file := range files[:k] {
				if loc, _, _ := strings.Cut(file, " "); strings.Contains(loc, "_test.go:") {
					t.at = filepath.Base(loc)
					break
				}
			}
			out = append(out, t)
			break
		}
	}
	return out
}

// shortFunc is a stack frame's function without its package's path and
// its arguments: "sync.(*WaitGroup).Wait(0xc0)" is
// "sync.(*WaitGroup).Wait", "github.com/a/b_test.TestX.func1(0xc0)" is
// "b_test.TestX.func1".
func shortFunc(frame string) string {
	if i := strings.LastIndexByte(frame, '('); i > 0 && strings.HasSuffix(frame, ")") {
		frame = frame[:i]
	}
	return frame[strings.LastIndexByte(frame, '/')+1:]
}

// testName is the name of the test whose function a stack frame calls,
// without its package: TestX, or TestX.func1 for a subtest's function.
func testName(frame string) string {
	_, name, _ := strings.Cut(shortFunc(frame), ".")
	return name
}
