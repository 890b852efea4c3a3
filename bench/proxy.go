package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
)

// proxy: a real net/http reverse proxy on loopback, its per-request
// deadline set by context.WithTimeout in one run and by a Scheduler's
// WithTimeout in the other, the one line that differs (see
// timeoutHandler). The proxy runs in this process, which measures it; the
// backend and the load generator run in a child process (proxyload.go).

// proxyConfig is the shape of the proxy run. JSON durations are integer
// nanoseconds.
type proxyConfig struct {
	Clients  int           `json:"clients"`     // concurrent keep-alive clients
	Slow     float64       `json:"slow"`        // fraction of requests the backend answers after SlowFor
	SlowFor  time.Duration `json:"slow_for_ns"` // the slow answer's delay
	Timeout  time.Duration `json:"timeout_ns"`  // the proxy's per-request timeout
	Warmup   time.Duration `json:"warmup_ns"`
	Duration time.Duration `json:"duration_ns"` // measured per run
	Rounds   int           `json:"rounds"`      // pairs of runs, interleaved
	Seed     uint64        `json:"seed"`
}

// defaultProxyConfig keeps the whole command near 20s: 2 rounds of two
// runs, each 1s of warm-up and 3s measured.
func defaultProxyConfig() proxyConfig {
	return proxyConfig{Clients: 64, Slow: 0.02, SlowFor: 2 * time.Second, Timeout: 500 * time.Millisecond,
		Warmup: time.Second, Duration: 3 * time.Second, Rounds: 2, Seed: 1}
}

// flags declares p's flags, with p's values as defaults; the child parses
// the same ones.
func (p *proxyConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&p.Clients, "clients", p.Clients, "concurrent keep-alive clients")
	fs.Float64Var(&p.Slow, "slow", p.Slow, "fraction of requests the backend answers after -slow-for, in [0,1]")
	fs.DurationVar(&p.SlowFor, "slow-for", p.SlowFor, "how long the backend takes on a slow request")
	fs.DurationVar(&p.Timeout, "timeout", p.Timeout, "the proxy's per-request timeout")
	fs.DurationVar(&p.Warmup, "warmup", p.Warmup, "load time before measuring, per run")
	fs.DurationVar(&p.Duration, "duration", p.Duration, "measured time per run")
	fs.IntVar(&p.Rounds, "rounds", p.Rounds, "rounds, each running both deadlines, in alternating order")
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "random seed of the load")
}

// args returns the command line that gives the child p.
func (p *proxyConfig) args() []string {
	return []string{proxyLoadCmd, "-clients", fmt.Sprint(p.Clients), "-slow", fmt.Sprint(p.Slow),
		"-slow-for", p.SlowFor.String(), "-timeout", p.Timeout.String(), "-warmup", p.Warmup.String(),
		"-duration", p.Duration.String(), "-rounds", fmt.Sprint(p.Rounds), "-seed", fmt.Sprint(p.Seed)}
}

// validate rejects values no run can use, naming the first bad flag.
func (p *proxyConfig) validate() error {
	checks := []struct {
		bad        bool
		name, rule string
		value      any
	}{
		{p.Clients < 1 || p.Clients > 10_000, "clients", "must be in [1, 10000]", p.Clients},
		{!(p.Slow >= 0 && p.Slow <= 1), "slow", "must be in [0,1]", p.Slow},
		{p.SlowFor <= 0, "slow-for", "must be > 0", p.SlowFor},
		{p.Timeout <= 0, "timeout", "must be > 0", p.Timeout},
		{p.Warmup < 0, "warmup", "must not be negative", p.Warmup},
		{p.Duration <= 0, "duration", "must be > 0", p.Duration},
		{p.Rounds < 1, "rounds", "must be >= 1", p.Rounds},
	}
	for _, c := range checks {
		if c.bad {
			return badFlag(c.name, c.value, c.rule)
		}
	}
	return nil
}

// Names of the two deadlines, as the report shows them.
const (
	nameCtxStdlib = "context.WithTimeout"
	nameCtxWheel  = "s.WithTimeout"
)

// withTimeout is the signature both deadlines share.
type withTimeout func(context.Context, time.Duration) (context.Context, context.CancelFunc)

// timeoutHandler gives every request a deadline of timeout before next
// serves it: the code a Go proxy writes, where with is context.WithTimeout
// or s.WithTimeout. The deferred cancel matters: ReverseProxy panics with
// http.ErrAbortHandler when a copy breaks, and the deadline must go then
// too.
func timeoutHandler(next http.Handler, with withTimeout, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := with(r.Context(), timeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// proxyMeter counts what the proxy served, and how late its timeouts
// were, while measuring.
type proxyMeter struct {
	measuring atomic.Bool
	served    atomic.Int64
	mu        sync.Mutex     // guards late and early
	late      hist.Histogram // 504s: their time minus the deadline
	early     int64          // 504s before the deadline
}

// count wraps next to count the requests it finishes.
func (m *proxyMeter) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		m.served.Add(1)
	})
}

// errorHandler answers 504 when the request's deadline passed and 502
// otherwise, as ReverseProxy.ErrorHandler.
func (m *proxyMeter) errorHandler(w http.ResponseWriter, r *http.Request, _ error) {
	ctx := r.Context()
	dl, ok := ctx.Deadline()
	if !ok || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	late := time.Since(dl)
	if m.measuring.Load() {
		m.mu.Lock()
		if late < 0 {
			m.early++
		}
		m.late.Record(int64(late))
		m.mu.Unlock()
	}
	w.WriteHeader(http.StatusGatewayTimeout)
}

// bufferPool recycles ReverseProxy's copy buffers, as production proxies
// do: without it each request allocates 32 KiB, which would drown what the
// deadline allocates.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// discardLog silences net/http's logs of broken connections, which the
// end of every run makes.
var discardLog = log.New(io.Discard, "", 0)

// ProxyResult is what the runs of one deadline measured, over their
// measured windows together.
type ProxyResult struct {
	Impl     string        `json:"impl"`
	Runs     int           `json:"runs"`
	Measured time.Duration `json:"measured_ns"`

	// As the load generator saw them.
	OK             int64   `json:"ok"`
	Timeouts       int64   `json:"timeouts"`
	Errors         int64   `json:"errors"`
	RequestsPerSec float64 `json:"requests_per_sec"`

	// The proxy process: requests it finished, its CPU, garbage collector
	// and allocations over the windows, and its live heap after each
	// window (the largest).
	Served        int64         `json:"served"`
	CPU           time.Duration `json:"cpu_ns"`
	CPUPerRequest time.Duration `json:"cpu_per_request_ns"`
	GC            gcCost        `json:"gc"`
	Allocs        uint64        `json:"allocs"`
	AllocBytes    uint64        `json:"alloc_bytes"`
	AllocsPerReq  float64       `json:"allocs_per_request"`
	BytesPerReq   float64       `json:"bytes_per_request"`
	HeapLive      int64         `json:"heap_live_bytes"`

	// Latency of the answered (200) requests, at the client.
	Latency hist.Percentiles `json:"latency"`
	// TimeoutLate is when the proxy answered 504, less the request's
	// deadline (its start plus the timeout); Early counts 504s before it.
	TimeoutLate hist.Percentiles `json:"timeout_late"`
	Early       int64            `json:"early"`

	latency, late hist.Snapshot // accumulated over the runs
}

// proxyResults is proxy's results in the JSON envelope.
type proxyResults struct {
	// Results are context.WithTimeout's and s.WithTimeout's, over their
	// runs together.
	Results []*ProxyResult     `json:"results"`
	Ratios  map[string]float64 `json:"ratios,omitempty"`
}

// proxyEnvConfig is proxy's config in the JSON envelope.
type proxyEnvConfig struct {
	proxyConfig
	Shards   int           `json:"shards"`
	Tick     time.Duration `json:"tick_ns"`
	Affinity bool          `json:"affinity,omitempty"`
}

// envelope is proxy's JSON document.
func (run *ProxyRun) envelope() envelope {
	v := run.verdict()
	return envelope{Host: run.Host, Config: proxyEnvConfig{run.Config, run.Shards, run.Tick, run.Affinity},
		Results: proxyResults{Results: run.Results, Ratios: run.Ratios}, Verdict: &v, Interrupted: run.Interrupted}
}

// measured returns the results that have runs: context's, then the
// wheel's, nil for one without.
func (run *ProxyRun) measured() (std, wheel *ProxyResult) {
	if run.Results[0].Runs > 0 {
		std = run.Results[0]
	}
	if run.Results[1].Runs > 0 {
		wheel = run.Results[1]
	}
	return std, wheel
}

// verdict sums up the proxy runs: s.WithTimeout's ratios to
// context.WithTimeout's where they matter.
func (run *ProxyRun) verdict() Verdict {
	v := Verdict{Ratios: run.Ratios, Winners: map[string]string{}}
	std, wheel := run.measured()
	if std == nil || wheel == nil {
		return v
	}
	names := []string{nameCtxStdlib, nameCtxWheel}
	for _, m := range proxyRows() {
		if m.key == "" {
			continue
		}
		if w := rowWinner(m, names, []*ProxyResult{std, wheel}); w != "" {
			v.Winners[m.key] = w
		}
	}
	r := func(key string) string {
		q, ok := run.Ratios[key]
		return fmtRatio(q, ok)
	}
	parts := []string{"CPU per request " + r("cpu_per_request"), "allocations per request " + r("allocs_per_request"),
		"bytes per request " + r("bytes_per_request")}
	if gcNoiseOf(std.GC) != "" || gcNoiseOf(wheel.GC) != "" {
		parts = append(parts, fmt.Sprintf("GC cycles %d vs %d (noise)", wheel.GC.Cycles, std.GC.Cycles))
	} else {
		parts = append(parts, "GC CPU "+r("gc_cpu"))
	}
	parts = append(parts, "latency p99 "+r("latency_p99"))
	if std.TimeoutLate.Count > 0 && wheel.TimeoutLate.Count > 0 {
		q, ok := run.Ratios["timeout_late_p50"]
		late := "504 lateness p50 " + lateDiff(wheel.TimeoutLate.P50, std.TimeoutLate.P50, run.Tick, q, ok)
		late += ", p99 " + r("timeout_late_p99")
		if min(std.TimeoutLate.Count, wheel.TimeoutLate.Count) < minSamples {
			late += fmt.Sprintf(" (noise: %d and %d timeouts)", wheel.TimeoutLate.Count, std.TimeoutLate.Count)
		}
		parts = append(parts, late)
	}
	v.Summary = []string{fmt.Sprintf("reverse proxy, s.WithTimeout against context.WithTimeout: %s.", strings.Join(parts, ", "))}
	if std.Early+wheel.Early > 0 {
		v.Summary = append(v.Summary, fmt.Sprintf("ERROR: 504s before the deadline: %d (s.WithTimeout), %d (context.WithTimeout).", wheel.Early, std.Early))
	}
	return v
}

// ProxyRun is the outcome of proxy.
type ProxyRun struct {
	Command     string             `json:"command"`
	Host        Host               `json:"host"`
	Config      proxyConfig        `json:"config"`
	Shards      int                `json:"shards"`
	Tick        time.Duration      `json:"tick_ns"`
	Affinity    bool               `json:"affinity,omitempty"`
	Results     []*ProxyResult     `json:"results"`
	Ratios      map[string]float64 `json:"ratios,omitempty"`
	Interrupted bool               `json:"interrupted"`
}

// proxyCompare runs the rounds: context, wheel; then wheel, context; and
// so on, so that a host that gets busier or quieter favours neither.
func proxyCompare(ctx context.Context, o options, p *progress) (*ProxyRun, error) {
	run := &ProxyRun{Command: "proxy", Host: host(), Config: o.proxy, Shards: o.shards, Tick: o.tick, Affinity: o.affinity}
	std, wheel := &ProxyResult{Impl: nameCtxStdlib}, &ProxyResult{Impl: nameCtxWheel}
	run.Results = []*ProxyResult{std, wheel}
	// A run: the child's start, warm-up, the window, the report.
	pl := newPlan(p, "proxy", repeat(o.proxy.Warmup+o.proxy.Duration+500*time.Millisecond, 2*o.proxy.Rounds))
	for round := range o.proxy.Rounds {
		order := []*ProxyResult{std, wheel}
		if round%2 == 1 {
			order = []*ProxyResult{wheel, std}
		}
		for _, res := range order {
			if ctx.Err() != nil {
				break
			}
			pl.start(fmt.Sprintf("round %d of %d: %s", round+1, o.proxy.Rounds, res.Impl))
			if err := proxyOnce(ctx, o, res, p.w); err != nil && ctx.Err() == nil {
				return run, err
			}
			settle()
		}
	}
	run.Interrupted = ctx.Err() != nil
	for _, r := range run.Results {
		r.finish()
	}
	if std.Runs > 0 && wheel.Runs > 0 {
		run.Ratios = ratios(proxyRows(), wheel, std)
	}
	return run, nil
}

// proxyOnce runs the proxy with res's deadline against a fresh child, and
// adds what it measured to res. An interrupted run adds nothing.
func proxyOnce(ctx context.Context, o options, res *ProxyResult, stderr io.Writer) error {
	with := withTimeout(context.WithTimeout)
	if res.Impl == nameCtxWheel {
		s, err := shardwheel.New(wheelOptions(o.shards, o.tick, o.affinity)...)
		if err != nil {
			return err
		}
		defer s.Stop()
		with = s.WithTimeout
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.CommandContext(ctx, exe, o.proxy.args()...)
	child.Stderr = stderr
	in, err := child.StdinPipe()
	if err != nil {
		return err
	}
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Wait() }()
	defer in.Close()
	lines := bufio.NewReader(out)

	backend, err := expect(lines, "backend ")
	if err != nil {
		return err
	}
	target, err := url.Parse(backend)
	if err != nil {
		return err
	}
	var m proxyMeter
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * o.proxy.Clients}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite:      func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:    tr,
		BufferPool:   &bufferPool{},
		ErrorHandler: m.errorHandler,
		ErrorLog:     discardLog,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: m.count(timeoutHandler(rp, with, o.proxy.Timeout)), ErrorLog: discardLog}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, err := fmt.Fprintf(in, "proxy http://%s\n", ln.Addr()); err != nil {
		return err
	}

	if _, err := expect(lines, "start"); err != nil {
		return err
	}
	a, servedA := sampleProc(), m.served.Load()
	m.measuring.Store(true)
	if _, err := expect(lines, "stop"); err != nil {
		return err
	}
	b, servedB := sampleProc(), m.served.Load()
	m.measuring.Store(false)
	heap := liveHeap()
	var rep loadReport
	if err := json.NewDecoder(lines).Decode(&rep); err != nil {
		return fmt.Errorf("reading the load's report: %w", err)
	}

	res.Runs++
	res.Measured += o.proxy.Duration
	res.OK += rep.OK
	res.Timeouts += rep.Timeouts
	res.Errors += rep.Errors
	res.Served += servedB - servedA
	res.CPU += b.cpu - a.cpu
	res.GC = res.GC.add(gcBetween(a, b))
	res.Allocs += b.allocs - a.allocs
	res.AllocBytes += b.allocB - a.allocB
	res.HeapLive = max(res.HeapLive, heap)
	var lat hist.Histogram
	for _, v := range rep.Latency {
		lat.Record(v)
	}
	res.latency.Merge(lat.Snapshot())
	m.mu.Lock()
	res.late.Merge(m.late.Snapshot())
	res.Early += m.early
	m.mu.Unlock()
	return nil
}

// expect reads the child's next line, which must start with prefix, and
// returns the rest of it.
func expect(r *bufio.Reader, prefix string) (string, error) {
	line, err := r.ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(prefix))
	if err != nil || !ok {
		return "", fmt.Errorf("the load process said %q, expected %q (%v)", line, prefix, err)
	}
	return strings.TrimSpace(rest), nil
}

// finish derives the rates and percentiles from the sums.
func (r *ProxyResult) finish() {
	if r.Measured > 0 {
		r.RequestsPerSec = float64(r.OK+r.Timeouts+r.Errors) / r.Measured.Seconds()
	}
	if r.Served > 0 {
		r.CPUPerRequest = r.CPU / time.Duration(r.Served)
		r.AllocsPerReq = float64(r.Allocs) / float64(r.Served)
		r.BytesPerReq = float64(r.AllocBytes) / float64(r.Served)
	}
	r.Latency = r.latency.Percentiles()
	r.TimeoutLate = r.late.Percentiles()
}

// proxyRows are the rows of the proxy report, in order.
func proxyRows() []metric[ProxyResult] {
	ms := []metric[ProxyResult]{
		{group: "throughput", key: "requests_per_sec", label: "requests/s", better: "higher",
			value: always(func(r *ProxyResult) float64 { return r.RequestsPerSec }),
			show:  func(r *ProxyResult) string { return units.SI(r.RequestsPerSec) }},
		{group: "throughput", label: "answered / timed out / failed",
			value: always(func(r *ProxyResult) float64 { return float64(r.OK) }),
			show:  func(r *ProxyResult) string { return fmt.Sprintf("%d / %d / %d", r.OK, r.Timeouts, r.Errors) }},
		{group: "proxy process", key: "cpu_per_request", label: "CPU per request", better: "lower",
			value: always(func(r *ProxyResult) float64 { return float64(r.CPUPerRequest) }),
			show:  func(r *ProxyResult) string { return units.Duration(r.CPUPerRequest) }},
		{group: "proxy process", key: "allocs_per_request", label: "allocations per request", better: "lower",
			value: always(func(r *ProxyResult) float64 { return r.AllocsPerReq }),
			show:  func(r *ProxyResult) string { return fmt.Sprintf("%.1f", r.AllocsPerReq) }},
		{group: "proxy process", key: "bytes_per_request", label: "bytes allocated per request", better: "lower",
			value: always(func(r *ProxyResult) float64 { return r.BytesPerReq }),
			show:  func(r *ProxyResult) string { return fmt.Sprintf("%.0f B", r.BytesPerReq) }},
		{group: "proxy process", key: "gc_cpu", label: "GC CPU time", better: "lower",
			value: always(func(r *ProxyResult) float64 { return float64(r.GC.CPU) }),
			show:  func(r *ProxyResult) string { return units.Duration(r.GC.CPU) },
			noise: func(r *ProxyResult) string { return gcNoiseOf(r.GC) }},
		{group: "proxy process", key: "gc_cycles", label: "GC cycles", better: "lower",
			value: always(func(r *ProxyResult) float64 { return float64(r.GC.Cycles) }),
			show:  func(r *ProxyResult) string { return fmt.Sprint(r.GC.Cycles) },
			noise: func(r *ProxyResult) string { return gcNoiseOf(r.GC) }},
		{group: "proxy process", key: "heap_live", label: "live heap after a window", better: "lower",
			value: always(func(r *ProxyResult) float64 { return float64(r.HeapLive) }),
			show:  func(r *ProxyResult) string { return units.SI(float64(r.HeapLive)) + "B" }},
	}
	ms = append(ms, latencyRows("latency of answered requests", "latency", "latency",
		func(r *ProxyResult) *hist.Percentiles { return &r.Latency })...)
	ms = append(ms, latencyRows("timeouts: 504 time minus the deadline", "timeout_late", "late",
		func(r *ProxyResult) *hist.Percentiles { return &r.TimeoutLate })...)
	return append(ms, metric[ProxyResult]{group: "timeouts: 504 time minus the deadline", key: "", label: "504s before the deadline (must be 0)",
		value: always(func(r *ProxyResult) float64 { return float64(r.Early) }),
		show:  func(r *ProxyResult) string { return fmt.Sprint(r.Early) }})
}

// writeText writes the runs as a table with notes.
func (run *ProxyRun) writeText(w io.Writer) error {
	var b strings.Builder
	c := run.Config
	fmt.Fprintf(&b, "%s vs %s in a reverse proxy on %s\n", nameCtxStdlib, nameCtxWheel, run.Host)
	fmt.Fprintf(&b, "load: %s -> httputil.ReverseProxy (timeout %v per request) -> net/http backend, all on 127.0.0.1;\n",
		plural(c.Clients, "keep-alive client"), c.Timeout)
	fmt.Fprintf(&b, "      the backend answers in 1-50ms, and %.3g%% of requests after %v (the proxy answers them 504)\n", 100*c.Slow, c.SlowFor)
	order := ", alternating the order"
	if c.Rounds == 1 {
		order = ""
	}
	fmt.Fprintf(&b, "measured %v per run after %v warm-up, %s%s; seed %d; shardwheel: %s, tick %v%s\n\n",
		c.Duration, c.Warmup, plural(c.Rounds, "round"), order, c.Seed, plural(run.Shards, "shard"), run.Tick, affinityNote(run.Affinity))
	t := &table{align: "lrrrl"}
	t.add("", nameCtxStdlib, nameCtxWheel, "ratio", "winner")
	std, wheel := run.measured()
	addRows(t, proxyRows(), run.Ratios, []string{nameCtxStdlib, nameCtxWheel}, std, wheel)
	if err := t.write(&b); err != nil {
		return err
	}
	b.WriteString("\nratio = s.WithTimeout / context.WithTimeout. The proxy process is measured alone: backend and\n" +
		"clients run in a child process. Late: the proxy's 504 time minus the request's deadline, measured in the proxy.\n")
	fmt.Fprintf(&b, "winner: the better figure (lower, except requests/s); \"tie\" within %.0f%%; \"noise\" where a figure rests on\n"+
		"  fewer than %d samples (percentiles) or %d GC cycles.\n", 100*tieWithin, minSamples, minGCCycles)
	if (std != nil && std.Early > 0) || (wheel != nil && wheel.Early > 0) {
		b.WriteString("ERROR: a deadline fired before it was due (504s before the deadline).\n")
	}
	if run.Interrupted {
		b.WriteString("INTERRUPTED: the figures cover the runs that finished.\n")
	}
	writeVerdict(&b, run.verdict())
	_, err := io.WriteString(w, b.String())
	return err
}
