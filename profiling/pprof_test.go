package profiling_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// Importing profiling registers nothing on http.DefaultServeMux: it does
// not import net/http/pprof, and serves the profilers itself.
func TestImportLeavesDefaultServeMuxAlone(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile", "/debug/fgprof", "/stats"} {
		h, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, path, nil))
		assert.Empty(t, pattern, path)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusNotFound, rec.Code, path)
	}
}

// fetch GETs url and returns the status, content type and body.
func fetch(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// The profilers answer as net/http/pprof's do, over a real listener:
// the binary profiles parse as pprof profiles, ?debug=N gives text, and
// ?seconds=N on a named profile gives the difference over N seconds. Not
// parallel: the process has one CPU profiler and one tracer.
func TestPprofEndpoints(t *testing.T) {
	srv, err := profiling.Serve(context.Background(), newScheduler(t, shardwheel.WithShards(1)), "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	base := "http://" + srv.Addr() + "/debug/pprof/"
	stop := busy()
	defer stop()

	parse := func(path string) *profile.Profile {
		t.Helper()
		code, ctype, body := fetch(t, base+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		assert.Equal(t, "application/octet-stream", ctype, path)
		p, err := profile.ParseData(body)
		require.NoError(t, err, path)
		require.NoError(t, p.CheckValid(), path)
		return p
	}
	types := func(p *profile.Profile) []string {
		var out []string
		for _, st := range p.SampleType {
			out = append(out, st.Type)
		}
		return out
	}

	cpu := parse("profile?seconds=1")
	assert.Equal(t, "cpu", cpu.PeriodType.Type)
	assert.Equal(t, []string{"samples", "cpu"}, types(cpu))
	// ?seconds=1 is honoured, not the default 30s: a profile ends at least
	// half a second in, and long before 30s, but on a busy host its end
	// (the sleep's wake-up, the profile's building) may come late.
	secondsHonoured := func(d time.Duration, what string) {
		assert.GreaterOrEqual(t, d, 500*time.Millisecond, what)
		assert.Less(t, d, 15*time.Second, what)
	}
	secondsHonoured(time.Duration(cpu.DurationNanos), "profile?seconds=1")
	assert.NotEmpty(t, cpu.Sample, "the busy goroutine is sampled")

	assert.Equal(t, []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}, types(parse("heap")))
	assert.Equal(t, []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}, types(parse("heap?gc=1")))
	assert.Equal(t, []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}, types(parse("allocs")))
	assert.NotEmpty(t, parse("goroutine").Sample)
	for _, name := range []string{"block", "mutex", "threadcreate"} {
		parse(name)
	}
	delta := parse("allocs?seconds=1")
	secondsHonoured(time.Duration(delta.DurationNanos), "allocs?seconds=1")

	for path, want := range map[string]string{
		"heap?debug=1":      "heap profile:",
		"goroutine?debug=1": "goroutine profile:",
		"goroutine?debug=2": "goroutine ",
		"cmdline":           os.Args[0],
		"":                  `<a href="heap?debug=1">heap</a>`,
	} {
		code, ctype, body := fetch(t, base+path)
		assert.Equal(t, http.StatusOK, code, path)
		assert.True(t, strings.HasPrefix(ctype, "text/"), "%s: %s", path, ctype)
		assert.Contains(t, string(body), want, path)
	}

	code, ctype, body := fetch(t, base+"trace?seconds=0.2")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/octet-stream", ctype)
	assert.True(t, bytes.HasPrefix(body, []byte("go 1.")), "an execution trace starts with its version: %.20q", body)

	for path, want := range map[string]string{
		"profile?seconds=abc":     `seconds="abc": want a number of seconds in (0, 3600]`,
		"profile?seconds=0":       `seconds="0"`,
		"profile?seconds=3601":    `seconds="3601"`,
		"trace?seconds=-1":        `seconds="-1"`,
		"heap?debug=x":            `debug="x": want an integer`,
		"heap?seconds=1&debug=1":  "seconds and debug cannot be combined",
		"cmdline?seconds=1":       "", // cmdline ignores it: 200
		"goroutine?seconds=x":     `seconds="x"`,
		"nope":                    `unknown profile "nope"`,
		"heap?gc=yes":             `gc="yes": want an integer`,
		"threadcreate?seconds=-2": `seconds="-2"`,
	} {
		code, _, body := fetch(t, base+path)
		if want == "" {
			assert.Equal(t, http.StatusOK, code, path)
			continue
		}
		assert.Contains(t, string(body), want, path)
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, code, path)
	}

	// The CPU profiler is the process's: a second profile fails at once.
	require.NoError(t, pprof.StartCPUProfile(io.Discard))
	code, _, body = fetch(t, base+"profile?seconds=1")
	pprof.StopCPUProfile()
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, string(body), "could not enable CPU profiling")
}

// busy keeps a goroutine on a CPU until stop is called, so that a CPU
// profile has samples.
func busy() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for x := 0; ; x++ {
			select {
			case <-done:
				return
			default:
			}
			if x%1000 == 0 {
				runtime.Gosched()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// symbolTarget is a function whose address the symbol test looks up.
func symbolTarget() {}

// symbol maps program counters to function names, by GET query or POST
// body, as pprof asks for them.
func TestPprofSymbol(t *testing.T) {
	t.Parallel()
	h := profiling.Handler(newScheduler(t, shardwheel.WithShards(1)))
	pc := reflect.ValueOf(symbolTarget).Pointer()
	name := runtime.FuncForPC(pc).Name()

	rec := get(t, h, "/debug/pprof/symbol")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "num_symbols: 1\n", rec.Body.String())

	rec = get(t, h, fmt.Sprintf("/debug/pprof/symbol?%#x+0x0+junk", pc))
	assert.Equal(t, fmt.Sprintf("num_symbols: 1\n%#x %s\n", pc, name), rec.Body.String())

	post := httptest.NewRecorder()
	h.ServeHTTP(post, httptest.NewRequest(http.MethodPost, "/debug/pprof/symbol", strings.NewReader(fmt.Sprintf("%#x+%#x", pc, pc))))
	assert.Equal(t, http.StatusOK, post.Code)
	assert.Equal(t, fmt.Sprintf("num_symbols: 1\n%#x %s\n%#x %s\n", pc, name, pc, name), post.Body.String())
}

// go tool pprof fetches the profiles from the handler as it does from
// net/http/pprof. Not parallel: it takes a CPU profile.
func TestGoToolPprof(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	srv, err := profiling.Serve(context.Background(), newScheduler(t, shardwheel.WithShards(1)), "127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	stop := busy()
	defer stop()

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-raw", "http://" + srv.Addr() + "/debug/pprof/heap"}, "inuse_space/bytes"},
		{[]string{"-raw", "-seconds", "1", "http://" + srv.Addr() + "/debug/pprof/profile"}, "cpu/nanoseconds"},
		{[]string{"-top", "http://" + srv.Addr() + "/debug/pprof/goroutine"}, "runtime.gopark"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, goTool, append([]string{"tool", "pprof"}, c.args...)...)
		cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir()) // where pprof saves what it fetched
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "go tool pprof %v:\n%s", c.args, out)
		assert.Contains(t, string(out), c.want, "go tool pprof %v", c.args)
	}
}
