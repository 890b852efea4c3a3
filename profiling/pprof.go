package profiling

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// The Go profilers, served from the Handler's own mux with runtime/pprof
// and runtime/trace: the paths, parameters and formats of net/http/pprof,
// which this package does not import, since importing it registers its
// handlers on http.DefaultServeMux.

// maxProfileSeconds bounds the seconds parameter of the profiles that run
// for a while: an hour is longer than anyone waits for a profile, and far
// from overflowing a time.Duration.
const maxProfileSeconds = 3600

// deltaProfiles are the named profiles that take ?seconds: their counts
// only grow, so the difference of two profiles is the period's.
var deltaProfiles = map[string]bool{
	"allocs": true, "block": true, "goroutine": true, "goroutineleak": true,
	"heap": true, "mutex": true, "threadcreate": true,
}

// profileDescriptions are the index page's descriptions.
var profileDescriptions = map[string]string{
	"allocs":       "A sampling of all past memory allocations.",
	"block":        "Stack traces that led to blocking on synchronization primitives (after runtime.SetBlockProfileRate).",
	"cmdline":      "The command line invocation of the current program.",
	"goroutine":    "Stack traces of all current goroutines; debug=2 prints them as an unrecovered panic does.",
	"heap":         "A sampling of memory allocations of live objects; gc=1 runs a garbage collection first.",
	"mutex":        "Stack traces of holders of contended mutexes (after runtime.SetMutexProfileFraction).",
	"profile":      "CPU profile for ?seconds (default 30), for go tool pprof.",
	"symbol":       "Maps program counters, given in a GET query or POST body separated by '+', to function names.",
	"threadcreate": "Stack traces that led to the creation of new OS threads.",
	"trace":        "An execution trace for ?seconds (default 1), for go tool trace.",
}

// mountPprof registers the profilers on mux under /debug/pprof/.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/{$}", pprofIndex)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprofCmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprofCPU)
	mux.HandleFunc("GET /debug/pprof/trace", pprofTrace)
	mux.HandleFunc("GET /debug/pprof/symbol", pprofSymbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprofSymbol)
	mux.HandleFunc("GET /debug/pprof/{name}", pprofNamed)
}

// pprofError writes a plain-text error, replacing the headers a profile
// set before it failed.
func pprofError(w http.ResponseWriter, status int, format string, args ...any) {
	h := w.Header()
	h.Del("Content-Disposition")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "profiling: "+format+"\n", args...)
}

// seconds parses the request's seconds parameter: def when absent, else
// a positive number of seconds up to maxProfileSeconds.
func seconds(r *http.Request, def time.Duration) (time.Duration, error) {
	v := r.URL.Query()
	if !v.Has("seconds") {
		return def, nil
	}
	sec, err := strconv.ParseFloat(v.Get("seconds"), 64)
	if err != nil || !(sec > 0) || sec > maxProfileSeconds {
		return 0, fmt.Errorf("seconds=%q: want a number of seconds in (0, %d]", v.Get("seconds"), maxProfileSeconds)
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// intParam parses the integer parameter name, 0 when absent.
func intParam(r *http.Request, name string) (int, error) {
	v := r.URL.Query()
	if !v.Has(name) {
		return 0, nil
	}
	n, err := strconv.Atoi(v.Get(name))
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want an integer", name, v.Get(name))
	}
	return n, nil
}

// extendWriteDeadline lets a response that waits d before writing
// outlive the server's WriteTimeout, if it has one, by d.
func extendWriteDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(srv.WriteTimeout + d))
	}
}

// wait blocks for d or until ctx is done, and reports whether d elapsed.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// attachment sets the headers of a binary profile named name.
func attachment(w http.ResponseWriter, name string) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	h.Set("X-Content-Type-Options", "nosniff")
}

// pprofCPU serves a CPU profile of ?seconds (default 30). If the request
// ends first (the client leaves, or the Server stops), the profile covers
// the time until then.
func pprofCPU(w http.ResponseWriter, r *http.Request) {
	d, err := seconds(r, 30*time.Second)
	if err != nil {
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	}
	extendWriteDeadline(w, r, d)
	// The headers are set first: once started, the profiler writes its
	// header to w.
	attachment(w, "profile")
	if err := pprof.StartCPUProfile(w); err != nil {
		pprofError(w, http.StatusInternalServerError, "could not enable CPU profiling: %v", err)
		return
	}
	wait(r.Context(), d)
	pprof.StopCPUProfile()
}

// pprofTrace serves an execution trace of ?seconds (default 1), cut short
// like pprofCPU's profile.
func pprofTrace(w http.ResponseWriter, r *http.Request) {
	d, err := seconds(r, time.Second)
	if err != nil {
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	}
	extendWriteDeadline(w, r, d)
	attachment(w, "trace")
	if err := trace.Start(w); err != nil {
		pprofError(w, http.StatusInternalServerError, "could not enable tracing: %v", err)
		return
	}
	wait(r.Context(), d)
	trace.Stop()
}

// pprofCmdline serves the command line, its arguments separated by NUL
// bytes.
func pprofCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.WriteString(w, strings.Join(os.Args, "\x00"))
}

// pprofSymbol maps the program counters of a GET query or POST body,
// separated by '+', to function names, one "0xpc name" line each after a
// "num_symbols: 1" line (which tells pprof that symbols are available);
// a counter that names no function is left out, as pprof expects.
func pprofSymbol(w http.ResponseWriter, r *http.Request) {
	var in io.Reader = strings.NewReader(r.URL.RawQuery)
	if r.Method == http.MethodPost {
		in = http.MaxBytesReader(w, r.Body, 1<<20)
	}
	// The whole input is read before anything is written.
	var out bytes.Buffer
	out.WriteString("num_symbols: 1\n")
	br := bufio.NewReader(in)
	for {
		word, err := br.ReadString('+')
		word = strings.TrimSuffix(word, "+")
		if pc, perr := strconv.ParseUint(strings.TrimSpace(word), 0, 64); perr == nil && pc != 0 {
			if f := runtime.FuncForPC(uintptr(pc)); f != nil {
				fmt.Fprintf(&out, "%#x %s\n", pc, f.Name())
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			pprofError(w, http.StatusBadRequest, "reading the request: %v", err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(out.Bytes())
}

// pprofNamed serves the runtime/pprof profile named by the path: in the
// protocol buffer format, or as text with ?debug=N for N > 0. ?gc=1 runs a
// garbage collection before a heap profile, and ?seconds=N returns the
// difference between profiles taken N seconds apart.
func pprofNamed(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p := pprof.Lookup(name)
	if p == nil {
		pprofError(w, http.StatusNotFound, "unknown profile %q (see the index, /debug/pprof/)", name)
		return
	}
	debug, err := intParam(r, "debug")
	if err == nil {
		var gc int
		if gc, err = intParam(r, "gc"); err == nil && gc > 0 && name == "heap" {
			runtime.GC()
		}
	}
	if err != nil {
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if r.URL.Query().Has("seconds") {
		deltaProfile(w, r, p, debug)
		return
	}
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
	} else {
		attachment(w, name)
	}
	_ = p.WriteTo(w, debug) // an error here means the client went away
}

// deltaProfile serves what p counted over ?seconds.
func deltaProfile(w http.ResponseWriter, r *http.Request, p *pprof.Profile, debug int) {
	d, err := seconds(r, 0)
	switch {
	case err != nil:
		pprofError(w, http.StatusBadRequest, "%v", err)
		return
	case !deltaProfiles[p.Name()]:
		pprofError(w, http.StatusBadRequest, "the %s profile does not take seconds", p.Name())
		return
	case debug != 0:
		pprofError(w, http.StatusBadRequest, "seconds and debug cannot be combined: a delta profile is binary")
		return
	}
	extendWriteDeadline(w, r, d)
	p0, err := collect(p)
	if err != nil {
		pprofError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if !wait(r.Context(), d) {
		pprofError(w, http.StatusServiceUnavailable, "the request ended before the profile: %v", r.Context().Err())
		return
	}
	p1, err := collect(p)
	if err != nil {
		pprofError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	at, took := p1.TimeNanos, p1.TimeNanos-p0.TimeNanos
	p0.Scale(-1)
	delta, err := profile.Merge([]*profile.Profile{p0, p1})
	if err != nil {
		pprofError(w, http.StatusInternalServerError, "computing the delta: %v", err)
		return
	}
	delta.TimeNanos, delta.DurationNanos = at, took
	attachment(w, p.Name()+"-delta")
	_ = delta.Write(w)
}

// collect returns p's current state, parsed, timed now.
func collect(p *pprof.Profile) (*profile.Profile, error) {
	var b bytes.Buffer
	if err := p.WriteTo(&b, 0); err != nil {
		return nil, fmt.Errorf("writing the %s profile: %w", p.Name(), err)
	}
	at := time.Now().UnixNano()
	pp, err := profile.Parse(&b)
	if err != nil {
		return nil, fmt.Errorf("parsing the %s profile: %w", p.Name(), err)
	}
	pp.TimeNanos = at
	return pp, nil
}

// pprofIndexTemplate is the index page. Its links are relative, so that
// they work under a prefix.
var pprofIndexTemplate = template.Must(template.New("pprof").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"/><title>/debug/pprof/</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d232a}
table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #e3e7eb;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}.d{color:#5f6b76}</style></head>
<body>
<p><a href="../../">shardwheel live stats</a> · /debug/pprof/</p>
<h1>/debug/pprof/</h1>
<table>
<tr><th>count</th><th>profile</th><th></th></tr>
{{- range .}}
<tr><td class="n">{{if ge .Count 0}}{{.Count}}{{end}}</td><td><a href="{{.Href}}">{{.Name}}</a></td><td class="d">{{.Desc}}</td></tr>
{{- end}}
</table>
<p class="d">go tool pprof http://HOST/debug/pprof/heap · go tool pprof http://HOST/debug/pprof/profile?seconds=30 ·
curl -o trace.out http://HOST/debug/pprof/trace?seconds=5 &amp;&amp; go tool trace trace.out</p>
</body></html>
`))

// indexEntry is one row of the index.
type indexEntry struct {
	Name, Href, Desc string
	Count            int // -1 for the endpoints that are not counted profiles
}

// pprofIndex lists the profiles.
func pprofIndex(w http.ResponseWriter, _ *http.Request) {
	var rows []indexEntry
	for _, p := range pprof.Profiles() {
		rows = append(rows, indexEntry{p.Name(), p.Name() + "?debug=1", profileDescriptions[p.Name()], p.Count()})
	}
	rows = append(rows,
		indexEntry{"cmdline", "cmdline", profileDescriptions["cmdline"], -1},
		indexEntry{"profile", "profile?seconds=30", profileDescriptions["profile"], -1},
		indexEntry{"symbol", "symbol", profileDescriptions["symbol"], -1},
		indexEntry{"trace", "trace?seconds=1", profileDescriptions["trace"], -1},
	)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = pprofIndexTemplate.Execute(w, rows)
}
