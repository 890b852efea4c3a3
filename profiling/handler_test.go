package profiling_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// get serves a GET of path by h in-process.
func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestHandlerStats(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(3))
	for key := range uint64(10) {
		_, err := s.Schedule(key, time.Hour, func() {})
		require.NoError(t, err)
	}

	rec := get(t, profiling.Handler(s), "/stats")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))

	var st shardwheel.Stats
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	assert.Equal(t, 10, st.Pending)
	assert.EqualValues(t, 10, st.Total.Scheduled)
	assert.Len(t, st.Shards, 3)

	// Histograms are served as percentiles, which Stats cannot decode
	// back into (hist.Snapshot keeps buckets): read them on their own.
	var pct struct {
		Total map[string]json.RawMessage `json:"total"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pct))
	for _, h := range []string{"tick_lag", "lateness", "task_time"} {
		var p map[string]int64
		require.NoError(t, json.Unmarshal(pct.Total[h], &p), h)
		assert.Contains(t, p, "p99_ns", h)
		assert.Contains(t, p, "count", h)
	}
}

func TestHandlerPage(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	fired := make(chan struct{})
	_, err := s.AfterFunc(time.Millisecond, func() { close(fired) })
	require.NoError(t, err)
	<-fired
	// Scheduled and cancelled at once: taken back before its shard saw
	// it, unless the shard's pass took it first.
	for range 100 {
		tm, err := s.Schedule(1, time.Hour, func() {})
		require.NoError(t, err)
		require.True(t, tm.Cancel())
	}
	taken := s.Stats().Total.TakenBack
	require.NotZero(t, taken)

	rec := get(t, profiling.Handler(s), "/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	page := rec.Body.String()
	for _, want := range []string{
		"2 shards", "tick 1ms",
		"latency", "p50", "p99", "p99.9", "max",
		"tick lag", "lateness", "task time",
		"shard", "diagnosis",
	} {
		assert.Contains(t, page, want)
	}
	assert.Regexp(t, fmt.Sprintf(`taken back before filing\s+%d\b`, taken), page)
}

// The page's diagnosis names what the counters point to.
func TestHandlerPageDiagnosis(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		opts []shardwheel.Option
		task func()
		want string
	}{
		"stats off":  {[]shardwheel.Option{shardwheel.WithStats(false)}, func() {}, "WithStats(false)"},
		"long tasks": {nil, func() { time.Sleep(3 * time.Millisecond) }, "WithExecutor"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := append([]shardwheel.Option{shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond)}, c.opts...)
			s := newScheduler(t, opts...)
			// Task time is sampled one task in 16: run enough of them.
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				_, err := s.AfterFunc(time.Millisecond, func() { c.task(); wg.Done() })
				require.NoError(t, err)
			}
			wg.Wait()
			// Shards publish their counters at the end of each pass,
			// which may be just after the last task returned.
			require.Eventually(t, func() bool { return s.Stats().Total.Fired == 32 }, 10*time.Second, time.Millisecond)
			assert.Contains(t, get(t, profiling.Handler(s), "/").Body.String(), c.want)
		})
	}
}

func TestHandlerProfilers(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))

	rec := get(t, h, "/debug/pprof/")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "goroutine")
	rec = get(t, h, "/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "goroutine profile")
	rec = get(t, h, "/debug/pprof/cmdline")
	assert.Equal(t, http.StatusOK, rec.Code)

	// fgprof takes whole seconds only.
	rec = get(t, h, "/debug/fgprof?seconds=1")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.NotEmpty(t, rec.Body.Bytes())
}

func TestHandlerNotFound(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))
	for _, path := range []string{"/nope", "/stats/extra", "/debug/", "/debug/fgprofx"} {
		assert.Equal(t, http.StatusNotFound, get(t, h, path).Code, path)
	}
}

// Under a prefix, http.StripPrefix gives the handler the paths it expects,
// and the pprof index's relative links keep working.
func TestHandlerUnderPrefix(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/shardwheel/", http.StripPrefix("/shardwheel", profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/shardwheel/", "/shardwheel/stats", "/shardwheel/debug/pprof/", "/shardwheel/debug/pprof/heap"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

func TestHandlerNilScheduler(t *testing.T) {
	assert.PanicsWithValue(t, "profiling: Handler: nil Scheduler", func() { profiling.Handler(nil) })
}
