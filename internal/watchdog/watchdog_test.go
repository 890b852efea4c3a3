package watchdog

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFireAfter: the watchdog reports a tenth of the timeout, at most a
// minute, before it: at 9m of go test's default 10m.
func TestFireAfter(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		10 * time.Minute: 9 * time.Minute,
		30 * time.Minute: 29 * time.Minute,
		5 * time.Minute:  4*time.Minute + 30*time.Second,
		30 * time.Second: 27 * time.Second,
		0:                0,
		-time.Second:     0,
	} {
		assert.Equal(t, want, fireAfter(timeout), "-timeout %v", timeout)
	}
}

// TestReportNamesTheWaitingTest: the report names this test, says what
// its goroutine waits for (a channel) and where (this file), says what to
// do, and gives the goroutine's stack.
func TestReportNamesTheWaitingTest(t *testing.T) {
	reported := make(chan string)
	go func() {
		var out string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			var b bytes.Buffer
			Report(&b, "pkg", 9*time.Minute, 10*time.Minute)
			if out = b.String(); strings.Contains(out, "TestReportNamesTheWaitingTest: chan receive") {
				break // the test below waits: the report saw it so
			}
		}
		reported <- out
	}()
	out := <-reported // the test's goroutine waits here, for the report
	assert.Contains(t, out, "watchdog: the tests of pkg have run for 9m0s; go test's -timeout of 10m0s stops them in 1m0s.")
	assert.Contains(t, out, "  TestReportNamesTheWaitingTest: chan receive, in watchdog.TestReportNamesTheWaitingTest, at watchdog_test.go:")
	assert.Contains(t, out, "go test -race -timeout 30m ./...")
	assert.Contains(t, out, "goroutine ", "the test's stack")
	assert.NotContains(t, out, "testing.runTests.func1(", "the testing package's own goroutine is no test")
}

// TestReportComesBeforeTheTimeout runs a test that never ends (testdata/
// hang) under a 10s -timeout: the watchdog's report, a second before it,
// names the test and what it waits for before go test's timeout panics.
func TestReportComesBeforeTheTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test for 10s: not with -short")
	}
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goCmd, "test", "-count=1", "-timeout=10s", "./testdata/hang")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the test never ends: go test's timeout stops it")
	s := string(out)
	report := strings.Index(s, "watchdog: the tests of package hang in ")
	panicked := strings.Index(s, "panic: test timed out after 10s")
	require.GreaterOrEqual(t, report, 0, "no report:\n%s", s)
	require.Greater(t, panicked, report, "the report comes before go test's timeout:\n%s", s)
	assert.Contains(t, s[report:panicked], "  TestHangs: select, in hang.TestHangs, at hang_test.go:")
}
