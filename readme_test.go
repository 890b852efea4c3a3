package shardwheel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// This file holds README.md's Go snippets, compiled and run by the examples
// below; TestReadmeSnippetsCompile fails when README shows code that is in
// no test file of the repository.

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

// FailStream fails the stream's request.
func (c *clientConn) FailStream(streamID uint32) { c.failed <- streamID }

// Close closes the connection.
func (c *clientConn) Close() {}

// Ping sends a heartbeat on the connection.
func (c *clientConn) Ping() {}

// quickStart is README's quick start: a request timeout and an idle one.
func quickStart(req *request, conn *clientConn) error {
	s, err := shardwheel.New() // one wheel per GOMAXPROCS, 1ms tick
	if err != nil {
		return err
	}
	defer s.Stop()

	// A request timeout, cancelled when the response arrives.
	timeout, err := s.AfterFunc(30*time.Second, func() { req.Fail(errTimedOut) })
	if err != nil {
		return err // ErrStopped, or ErrTooManyPending at the WithMaxPending limit: shed the request
	}
	<-req.response
	if !timeout.Cancel() {
		return errTimedOut // the timeout ran first
	}

	// An idle timeout, pushed back on every read: one CAS, no allocation.
	idle, err := s.AfterFunc(time.Minute, func() { conn.Close() })
	if err != nil {
		return err
	}
	idle.Reset(time.Minute)
	return nil
}

func Example_quickStart() {
	req := &request{response: make(chan string, 1), failed: make(chan error, 1)}
	req.response <- "200 OK"
	fmt.Println(quickStart(req, &clientConn{}))
	// Output: <nil>
}

// streams is README's keyed timers: two connections whose stream ids
// overlap, each stream's timeout indexed by connection and stream.
func streams(s *shardwheel.Scheduler, conn *clientConn, streamID uint32, delay time.Duration) (cancelled bool, err error) {
	// Keys are one namespace per Scheduler: put the connection in them.
	key := conn.ID<<32 | uint64(streamID)
	if _, err := s.ScheduleKey(key, delay, func() { conn.FailStream(streamID) }); err != nil {
		return false, err
	}
	// ... the stream's response arrives: find its timer by key alone.
	return s.CancelKey(key), nil
}

func Example_keys() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	a := &clientConn{ID: 1, failed: make(chan uint32, 1)}
	b := &clientConn{ID: 2, failed: make(chan uint32, 1)}
	// Stream 1 on both connections: two keys, two timers.
	if _, err := s.ScheduleKey(a.ID<<32|1, time.Millisecond, func() { a.FailStream(1) }); err != nil {
		panic(err)
	}
	cancelled, err := streams(s, b, 1, time.Hour)
	fmt.Println("b's stream 1 cancelled:", cancelled, err)
	fmt.Println("a's stream", <-a.failed, "timed out")
	// Output:
	// b's stream 1 cancelled: true <nil>
	// a's stream 1 timed out
}

// handlers is README's Handler snippet: one task for many timers.
func handlers(s *shardwheel.Scheduler, failRequest func(uint64), requestID uint64) error {
	fail, err := s.NewHandler(failRequest) // once: func(requestID uint64)
	if err != nil {
		return err
	}
	t, err := fail.AfterFunc(requestID, 30*time.Second) // per request: no closure
	if err != nil {
		return err
	}
	t.Cancel()
	return nil
}

func Example_handlers() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	fmt.Println(handlers(s, func(id uint64) { fmt.Println("request", id, "timed out") }, 7), s.Pending())
	// Output: <nil> 0
}

// deadlines is README's context snippet: a proxy's per-request deadline.
func deadlines(s *shardwheel.Scheduler, proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.WithTimeout(r.Context(), 500*time.Millisecond) // was: context.WithTimeout
		defer cancel()
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
}

func Example_deadlines() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		fmt.Println(context.Cause(r.Context()))
	})
	deadlines(s, slow).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	// Output: context deadline exceeded
}

// connTimers is README's snippet of periodic timers, slack and CancelWait:
// a connection's heartbeat and idle timeout, ended when it closes.
func connTimers(ctx context.Context, s *shardwheel.Scheduler, conn *clientConn) error {
	// A heartbeat on the grid every 30s; after a stall, one beat, not a burst.
	hb, err := s.Every(conn.ID, 30*time.Second, shardwheel.SkipMissed, conn.Ping)
	if err != nil {
		return err
	}
	// An idle timeout that may run up to a second late: no cascade, shared wake-ups.
	idle, err := s.ScheduleWithin(conn.ID, time.Minute, time.Second, conn.Close)
	if err != nil {
		return err
	}
	// ... on close: end both; CancelWait returns once a beat in progress has returned.
	idle.Cancel()
	_, err = hb.CancelWait(ctx)
	return err
}

func Example_connTimers() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	fmt.Println(connTimers(context.Background(), s, &clientConn{ID: 1}), s.Pending())
	// Output: <nil> 0
}

// goFence matches a Go code block of a Markdown file.
var goFence = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestReadmeSnippetsCompile: every Go snippet in README.md appears, line for
// line (indentation aside), in a test file of the repository, so that the
// compiler and the examples check it.
func TestReadmeSnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var sources []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, "\n"+trimLines(string(b))+"\n")
		}
		return err
	}))
	snippets := goFence.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, snippets, "README.md has no Go snippet")
	for _, m := range snippets {
		want := "\n" + trimLines(m[1]) + "\n"
		found := false
		for _, src := range sources {
			found = found || strings.Contains(src, want)
		}
		require.True(t, found, "README.md's snippet is in no test file:\n%s", m[1])
	}
}

// trimLines trims each line of s of its surrounding white space.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}
