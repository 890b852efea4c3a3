package profiling_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// client does not keep connections alive, so that a request made after
// the server stopped needs a new connection and fails.
var client = &http.Client{
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   10 * time.Second,
}

// getStats fetches /stats from the server at addr.
func getStats(addr string) (statsBody, error) {
	var st statsBody
	resp, err := client.Get("http://" + addr + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errors.New(resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func TestServeDefaultAddrIsLoopback(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1))
	srv, err := profiling.Serve(context.Background(), s, "")
	if errors.Is(err, syscall.EADDRINUSE) {
		t.Skipf("%s is taken on this machine: %v", profiling.DefaultAddr, err)
	}
	require.NoError(t, err)
	defer srv.Close()

	host, _, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	ip := net.ParseIP(host)
	require.NotNil(t, ip, "host %q", host)
	assert.True(t, ip.IsLoopback(), "Serve(\"\") listens on %s", srv.Addr())
	assert.Equal(t, profiling.DefaultAddr, srv.Addr())

	_, err = s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
	require.NoError(t, err)
	st, err := getStats(srv.Addr())
	require.NoError(t, err)
	assert.Equal(t, 1, st.SinceStart.Pending)
}

// ServeWith serves what HandlerWith does: /metrics from Options.Metrics.
func TestServeWith(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1))
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "up 1\n") })
	srv, err := profiling.ServeWith(context.Background(), s, "127.0.0.1:0", profiling.Options{Metrics: metrics})
	require.NoError(t, err)
	defer srv.Close()
	resp, err := client.Get("http://" + srv.Addr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "up 1\n", string(b))

	_, err = profiling.ServeWith(context.Background(), nil, "127.0.0.1:0", profiling.Options{})
	assert.EqualError(t, err, "profiling: ServeWith: nil Scheduler")
}

func TestServeClose(t *testing.T) {
	t.Parallel()
	srv, err := profiling.Serve(context.Background(), newScheduler(t, shardwheel.WithShards(1)), "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	assert.NotEqual(t, "0", port, "Addr reports the port picked")

	_, err = getStats(srv.Addr())
	require.NoError(t, err)

	require.NoError(t, srv.Close())
	require.NoError(t, srv.Wait())
	require.NoError(t, srv.Close(), "Close is idempotent")
	_, err = getStats(srv.Addr())
	assert.Error(t, err, "request after Close")
}

func TestServeStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := profiling.Serve(ctx, newScheduler(t, shardwheel.WithShards(1)), "127.0.0.1:0")
	require.NoError(t, err)
	_, err = getStats(srv.Addr())
	require.NoError(t, err)

	cancel()
	require.NoError(t, srv.Wait())
	_, err = getStats(srv.Addr())
	assert.Error(t, err, "request after the context ended")
}

// Stopping the server ends a long CPU profile early instead of waiting
// for it (the profile handler watches the request's context); the client
// still gets the profile of the time elapsed. Not parallel: the process
// has one CPU profiler.
func TestServeCloseEndsLongProfile(t *testing.T) {
	srv, err := profiling.Serve(context.Background(), newScheduler(t, shardwheel.WithShards(1)), "127.0.0.1:0")
	require.NoError(t, err)

	type result struct {
		code int
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := client.Get("http://" + srv.Addr() + "/debug/pprof/profile?seconds=60")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, b, err}
	}()
	require.Eventually(t, cpuProfileServing, 10*time.Second, 5*time.Millisecond)

	// Close ends the 60s profile instead of waiting it out: it returns in
	// well under its length (the bound leaves a busy host room), and the
	// client gets the profile whole (below), which a request cut off at
	// the shutdown timeout would not.
	start := time.Now()
	require.NoError(t, srv.Close())
	assert.Less(t, time.Since(start), 30*time.Second, "Close waited for the 60s profile")
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.code)
	p, err := profile.ParseData(r.body)
	require.NoError(t, err)
	assert.Equal(t, "cpu", p.PeriodType.Type)
}

// cpuProfileServing reports whether a goroutine of this process is in
// the CPU profile handler, which the server runs in process.
func cpuProfileServing() bool {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		return false
	}
	return strings.Contains(b.String(), "profiling.pprofCPU(")
}

func TestServeErrors(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1))
	srv, err := profiling.Serve(context.Background(), s, "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()

	_, err = profiling.Serve(context.Background(), s, srv.Addr())
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.ErrorContains(t, err, "profiling: ")

	_, err = profiling.Serve(context.Background(), nil, "127.0.0.1:0")
	assert.EqualError(t, err, "profiling: Serve: nil Scheduler")
}
