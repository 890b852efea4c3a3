package profiling_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// browser is the Accept header Chrome sends for a page.
const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

// get serves a GET of path by h in-process.
func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	return getAccept(t, h, path, "")
}

// getAccept serves a GET of path by h in-process with the Accept header
// accept, if not empty.
func getAccept(t *testing.T, h http.Handler, path, accept string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// statsBody is /stats, histograms read as their JSON percentiles.
type statsBody struct {
	Time            time.Time     `json:"time"`
	WindowNs        time.Duration `json:"window_ns"`
	RequestedWindow time.Duration `json:"requested_window_ns"`
	Window          statsJSON     `json:"window"`
	SinceStart      statsJSON     `json:"since_start"`
}

// statsJSON is a stats.Stats in JSON.
type statsJSON struct {
	Pending int         `json:"pending"`
	Total   shardJSON   `json:"total"`
	Shards  []shardJSON `json:"shards"`
}

// shardJSON is the part of a stats.Shard in JSON the tests read.
type shardJSON struct {
	Scheduled   uint64   `json:"scheduled"`
	Fired       uint64   `json:"fired"`
	TickLag     distJSON `json:"tick_lag"`
	Lateness    distJSON `json:"lateness"`
	TaskTime    distJSON `json:"task_time"`
	PassTime    distJSON `json:"pass_time"`
	SlowestPass struct {
		Duration *int64 `json:"duration_ns"`
	} `json:"slowest_pass"`
}

// distJSON is a Histogram in JSON.
type distJSON struct {
	P50   time.Duration  `json:"p50_ns"`
	P99   time.Duration  `json:"p99_ns"`
	P999  *time.Duration `json:"p999_ns"`
	Max   time.Duration  `json:"max_ns"`
	Mean  *time.Duration `json:"mean_ns"`
	Count uint64         `json:"count"`
}

// getStatsJSON fetches and decodes path, a /stats URL, from h.
func getStatsJSON(t *testing.T, h http.Handler, path string) statsBody {
	t.Helper()
	rec := get(t, h, path)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var st statsBody
	d := json.NewDecoder(rec.Body)
	require.NoError(t, d.Decode(&st))
	return st
}

// clock is a fake time source the tests advance.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestHandlerStats(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(3))
	c := newClock()
	h := profiling.HandlerAt(s, profiling.Options{}, c.now)
	for key := range uint64(10) {
		_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(key))
		require.NoError(t, err)
	}
	c.advance(3 * time.Second)

	rec := get(t, h, "/stats")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &top))
	assert.ElementsMatch(t, []string{"time", "window_ns", "requested_window_ns", "window", "since_start"}, keys(top))

	var st statsBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	assert.Equal(t, c.now(), st.Time)
	assert.Equal(t, 3*time.Second, st.WindowNs, "the window starts at the handler's creation, the only earlier snapshot")
	assert.Equal(t, profiling.DefaultWindow, st.RequestedWindow)
	for name, v := range map[string]statsJSON{"window": st.Window, "since_start": st.SinceStart} {
		assert.Equal(t, 10, v.Pending, name)
		assert.Len(t, v.Shards, 3, name)
		for _, d := range []distJSON{v.Total.TickLag, v.Total.Lateness, v.Total.TaskTime, v.Total.PassTime} {
			assert.NotNil(t, d.Mean, "%s: mean_ns", name)
			assert.NotNil(t, d.P999, "%s: p999_ns", name)
		}
		assert.NotNil(t, v.Total.SlowestPass.Duration, "%s: slowest_pass.duration_ns", name)
	}
	assert.EqualValues(t, 10, st.SinceStart.Total.Scheduled)
	assert.EqualValues(t, 10, st.Window.Total.Scheduled, "scheduled after the handler was created")

	// The window moves on: nothing was scheduled in the last 2s.
	c.advance(2 * time.Second)
	st = getStatsJSON(t, h, "/stats?window=2s")
	assert.Equal(t, 2*time.Second, st.WindowNs)
	assert.Equal(t, 2*time.Second, st.RequestedWindow)
	assert.Zero(t, st.Window.Total.Scheduled)
	assert.EqualValues(t, 10, st.SinceStart.Total.Scheduled)
}

// keys returns m's keys.
func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ?window= and ?refresh= are contracts: a Go duration within bounds, or
// 400 with the reason.
func TestHandlerQueryParameters(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))
	for _, c := range []struct {
		query string
		code  int
		want  string // in the body
	}{
		{"", 200, ""},
		{"?window=1s", 200, ""},
		{"?window=5m", 200, ""},
		{"?window=90s", 200, ""},
		{"?window=2m30s", 200, ""},
		{"?window=abc", 400, `profiling: window="abc" is not a Go duration such as 10s, 90s or 2m30s: want from 1s to 5m`},
		{"?window=10", 400, `window="10" is not a Go duration`},
		{"?window=", 400, `window="" is not a Go duration`},
		{"?window=0", 400, "profiling: window=0 is out of range: want from 1s to 5m"},
		{"?window=999ms", 400, "window=999ms is out of range"},
		{"?window=-10s", 400, "window=-10s is out of range"},
		{"?window=5m1s", 400, "window=5m1s is out of range"},
		{"?window=1s&window=2s", 400, "window is given 2 times: give it once"},
		{"?refresh=0", 200, ""},
		{"?refresh=2s", 200, ""},
		{"?refresh=1h", 200, ""},
		{"?refresh=500ms", 400, "profiling: refresh=500ms is out of range: want 0 (off) or from 1s to 1h"},
		{"?refresh=2h", 400, "refresh=2h is out of range"},
		{"?refresh=soon", 400, `refresh="soon" is not a Go duration`},
	} {
		for _, path := range []string{"/", "/stats"} {
			if path == "/stats" && strings.HasPrefix(c.query, "?refresh") {
				continue // /stats takes no refresh
			}
			for _, accept := range []string{"", browser} {
				rec := getAccept(t, h, path+c.query, accept)
				assert.Equal(t, c.code, rec.Code, "%s%s (%s): %s", path, c.query, accept, rec.Body.String())
				if c.code != 200 {
					assert.Contains(t, rec.Body.String(), c.want, "%s%s", path, c.query)
					assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
				}
			}
		}
	}
}

// GET / serves HTML when the Accept header prefers it, text otherwise.
func TestHandlerPageNegotiation(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))
	for accept, want := range map[string]string{
		"":                                     "text/plain; charset=utf-8",
		"*/*":                                  "text/plain; charset=utf-8",
		"text/plain":                           "text/plain; charset=utf-8",
		browser:                                "text/html; charset=utf-8",
		"text/html":                            "text/html; charset=utf-8",
		"application/xhtml+xml":                "text/html; charset=utf-8",
		"text/html;q=0":                        "text/plain; charset=utf-8",
		"text/plain;q=0.5, text/html":          "text/html; charset=utf-8",
		"text/html;q=0.5, text/plain":          "text/plain; charset=utf-8",
		"TEXT/HTML ; Q=0.9 , text/plain;q=0.8": "text/html; charset=utf-8",
	} {
		rec := getAccept(t, h, "/", accept)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, want, rec.Header().Get("Content-Type"), "Accept: %q", accept)
		assert.Equal(t, "Accept", rec.Header().Get("Vary"))
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	}
}

func TestHandlerPage(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	h := profiling.Handler(s)
	fired := make(chan struct{})
	_, err := s.AfterFunc(time.Millisecond, func() { close(fired) })
	require.NoError(t, err)
	<-fired
	// Scheduled and cancelled at once on this goroutine's P: taken back
	// (the last timer filed), unless the shard's pass filed another.
	for range 100 {
		tm, err := s.AfterFunc(time.Hour, func() {})
		require.NoError(t, err)
		require.True(t, tm.Cancel())
	}
	// The shard goroutine publishes the holders' counts at its next pass,
	// which Stats wakes it for.
	var taken uint64
	require.Eventually(t, func() bool {
		taken = s.Stats().Total.TakenBack
		return taken != 0
	}, 10*time.Second, time.Millisecond)

	rec := get(t, h, "/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	page := rec.Body.String()
	for _, want := range []string{
		"2 shards", "tick 1ms",
		"== last ", "== since the scheduler started ==", "?window=",
		"/stats?window=10s", "/debug/pprof/", "/debug/fgprof?seconds=10",
		"latency", "p50", "p99", "p99.9", "max",
		"tick lag", "lateness", "task time", "pass time",
		"shard", "diagnosis",
	} {
		assert.Contains(t, page, want)
	}
	assert.NotContains(t, page, "/metrics", "no metrics handler, no link")
	assert.Regexp(t, fmt.Sprintf(`taken back at once\s+%d\b`, taken), page)
}

// The text page prints paths a reader can paste, under a prefix too.
func TestHandlerTextPathsUnderPrefix(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/timers/", http.StripPrefix("/timers", profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))))
	rec := get(t, mux, "/timers/?window=30s")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "Also: /timers/stats?window=30s (JSON), /timers/debug/pprof/, /timers/debug/fgprof?seconds=10\n")
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
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				_, err := s.AfterFunc(time.Millisecond, func() { c.task(); wg.Done() })
				require.NoError(t, err)
			}
			wg.Wait()
			awaitFired(t, s, 32)
			assert.Contains(t, get(t, profiling.Handler(s), "/").Body.String(), c.want)
		})
	}
}

// The window moves with the load: a spike shows in the window, undiluted,
// while the totals, which hold hours of normal traffic on a real server,
// dilute it; and once the window has moved past it, the window is quiet
// again while the totals keep it.
func TestHandlerWindowMovesWithLoad(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond), shardwheel.WithBlockedAfter(0)) // the spike: tasks hold the wheel
	c := newClock()
	h := profiling.HandlerAt(s, profiling.Options{}, c.now)
	fire := func(n int, delay func(i int) time.Duration, task func()) (markers uint64) {
		t.Helper()
		want := s.Stats().Total.Fired + uint64(n)
		for i := range n {
			_, err := s.AfterFunc(delay(i), task)
			require.NoError(t, err)
		}
		return awaitFired(t, s, want)
	}
	request := func() statsBody {
		t.Helper()
		c.advance(time.Second)
		return getStatsJSON(t, h, "/stats?window=2s")
	}

	// Normal traffic: timers spread over 2000 ticks, on time.
	fire(4000, func(i int) time.Duration { return time.Duration(i%2000) * time.Millisecond / 2 }, func() {})
	for range 3 {
		request()
	}
	// The spike: a task blocks its shard for 20ms, twenty times in a row,
	// each in its own tick, so that every later timer waits.
	markers := fire(20, func(i int) time.Duration { return time.Duration(i+1) * time.Millisecond }, func() { time.Sleep(20 * time.Millisecond) })
	st := request()
	require.Equal(t, 2*time.Second, st.WindowNs)
	win, total := st.Window.Total.Lateness, st.SinceStart.Total.Lateness
	assert.EqualValues(t, 20+markers, st.Window.Total.Fired, "the window holds the spike alone")
	assert.GreaterOrEqual(t, win.P50, 20*time.Millisecond, "the spike, undiluted: half its timers waited behind one task or more")
	assert.GreaterOrEqual(t, win.Max, 100*time.Millisecond)
	assert.Less(t, total.P50, win.P50/4, "the totals dilute it")
	assert.GreaterOrEqual(t, total.Max, win.Max-time.Millisecond, "the totals hold the worst too")

	// The page shows the window, and the spike in its history.
	page := getAccept(t, h, "/?window=2s", browser).Body.String()
	assert.Contains(t, page, "last 2s")
	assert.Contains(t, page, "Spikes in the last")
	assert.Contains(t, page, "long tasks", "the spike's cause")
	text := get(t, h, "/?window=2s").Body.String()
	assert.Contains(t, text, "== last 2s ==")
	assert.Regexp(t, `spike|long tasks`, text)

	// Two quiet seconds later the window has moved past the spike.
	request()
	st = request()
	assert.Zero(t, st.Window.Total.Fired)
	assert.Zero(t, st.Window.Total.Lateness.Count)
	assert.GreaterOrEqual(t, st.SinceStart.Total.Lateness.Max, win.Max-time.Millisecond, "the totals keep it")
}

// The HTML page has the report's charts, with data once requests have
// built a history, and every path on it is a link that works.
func TestHandlerHTMLPage(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	c := newClock()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "# metrics\n") })
	mux := http.NewServeMux()
	mux.Handle("/timers/", http.StripPrefix("/timers", profiling.HandlerAt(s, profiling.Options{Metrics: metrics}, c.now)))
	for i := range 5 {
		var wg sync.WaitGroup
		for j := range 50 {
			wg.Add(1)
			_, err := s.AfterFunc(time.Duration(j%10)*time.Millisecond, wg.Done)
			require.NoError(t, err)
		}
		wg.Wait()
		c.advance(time.Second)
		require.Equal(t, http.StatusOK, getAccept(t, mux, fmt.Sprintf("/timers/?n=%d", i), browser).Code)
	}
	rec := getAccept(t, mux, "/timers/?window=30s&refresh=2s", browser)
	require.Equal(t, http.StatusOK, rec.Code)
	page := rec.Body.String()
	requireWellFormed(t, page)
	assert.Contains(t, page, `<meta http-equiv="refresh" content="2"/>`)
	blocks := charts(page)
	require.Len(t, blocks, 8)
	titles := map[string]bool{}
	for _, b := range blocks {
		ch := requireReadable(t, b, true)
		titles[ch.title] = true
	}
	for _, want := range []string{"Tick lag", "Timer lateness", "Pass time", "Throughput", "Task time", "Pending timers", "Queued new timers"} {
		assert.True(t, titles[want], "chart %q in %v", want, titles)
	}

	// Every link resolves to a path of the handler; those that profile
	// for a while are asked for a short time.
	links, unlinked := pageLinks(t, page)
	assert.Empty(t, unlinked, "paths on the page that are not links")
	require.NotEmpty(t, links)
	for _, want := range []string{"stats?window=30s", "debug/pprof/", "debug/pprof/profile?seconds=30", "debug/pprof/heap",
		"debug/pprof/trace?seconds=1", "debug/fgprof?seconds=10", "metrics", "?window=10s&refresh=2s", "?window=30s&refresh=0"} {
		assert.Contains(t, links, want)
	}
	base, err := url.Parse("http://host/timers/")
	require.NoError(t, err)
	short := regexp.MustCompile(`seconds=\d+`)
	for _, l := range links {
		u, err := base.Parse(short.ReplaceAllString(l, "seconds=1"))
		require.NoError(t, err, l)
		rec := getAccept(t, mux, u.RequestURI(), browser)
		assert.Equal(t, http.StatusOK, rec.Code, "link %q (%s): %s", l, u.RequestURI(), rec.Body.String())
	}
}

// pageLinks returns the page's hrefs, and the text outside links that
// looks like one of the handler's paths.
func pageLinks(t *testing.T, page string) (links, unlinked []string) {
	t.Helper()
	path := regexp.MustCompile(`(^|[\s(:,])/?(stats\?|debug/|metrics\b)\S*`)
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	inLink, skip := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return links, unlinked
		}
		require.NoError(t, err)
		switch tk := tok.(type) {
		case xml.StartElement:
			switch tk.Name.Local {
			case "a":
				inLink++
				for _, a := range tk.Attr {
					if a.Name.Local == "href" {
						links = append(links, a.Value)
					}
				}
			case "style", "title", "svg":
				skip++
			}
		case xml.EndElement:
			switch tk.Name.Local {
			case "a":
				inLink--
			case "style", "title", "svg":
				skip--
			}
		case xml.CharData:
			if inLink == 0 && skip == 0 {
				unlinked = append(unlinked, path.FindAllString(string(tk), -1)...)
			}
		}
	}
}

func TestHandlerMetrics(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1))
	var methods []string
	var mu sync.Mutex
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "shardwheel_fired_total 0\n")
	})
	h := profiling.HandlerWith(s, profiling.Options{Metrics: metrics})
	rec := get(t, h, "/metrics")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "shardwheel_fired_total 0\n", rec.Body.String())
	post := httptest.NewRecorder()
	h.ServeHTTP(post, httptest.NewRequest(http.MethodPost, "/metrics", nil))
	assert.Equal(t, []string{"GET", "POST"}, methods, "the metrics handler decides about methods")
	assert.Contains(t, getAccept(t, h, "/", browser).Body.String(), `<a href="metrics"`)
	assert.Contains(t, get(t, h, "/").Body.String(), ", /metrics\n")

	plain := profiling.Handler(s)
	assert.Equal(t, http.StatusNotFound, get(t, plain, "/metrics").Code)
	assert.NotContains(t, getAccept(t, plain, "/", browser).Body.String(), `href="metrics"`)
}

func TestHandlerNotFound(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))
	for _, path := range []string{"/nope", "/stats/extra", "/debug/", "/debug/fgprofx", "/debug/pprof/nope", "/debug/pprof/heap/x"} {
		assert.Equal(t, http.StatusNotFound, get(t, h, path).Code, path)
	}
	for _, path := range []string{"/", "/stats", "/debug/pprof/heap"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "POST %s", path)
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
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

func TestHandlerNilScheduler(t *testing.T) {
	t.Parallel()
	assert.PanicsWithValue(t, "profiling: Handler: nil Scheduler", func() { profiling.Handler(nil) })
	assert.PanicsWithValue(t, "profiling: HandlerWith: nil Scheduler", func() { profiling.HandlerWith(nil, profiling.Options{}) })
}

// A Handler starts no goroutine, not even after serving every kind of
// page: nothing is left running once its requests are done.
func TestHandlerStartsNoGoroutine(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	require.NoError(t, err)
	base := goleak.IgnoreCurrent() // the scheduler's shards, and other tests'
	h := profiling.HandlerWith(s, profiling.Options{Metrics: http.NotFoundHandler()})
	for _, path := range []string{"/", "/?window=1m", "/stats", "/stats?window=5m", "/debug/pprof/", "/debug/pprof/heap", "/metrics"} {
		for _, accept := range []string{"", browser} {
			want := http.StatusOK
			if path == "/metrics" {
				want = http.StatusNotFound // the metrics handler given
			}
			assert.Equal(t, want, getAccept(t, h, path, accept).Code, path)
		}
	}
	goleak.VerifyNone(t, base)
	s.Stop()
}
