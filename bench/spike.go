package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// spike: a spike of timers comes back. N timers due in an hour are
// scheduled at once and then all cancelled, as a proxy's request
// timeouts pile up while its upstreams stall and are cancelled as it
// recovers; the command measures the process's heap and the time a
// forced collection takes before the spike, at its peak and every second
// after, until both are back near the pre-spike figures, and then the
// peak of a second spike of the same size. A proxy's steady churn runs
// throughout unless -churn=false. Every run is a fresh process
// (spikerun.go), the implementations interleaved.

// SpikeConfig is the spike command's shape. JSON durations are integer
// nanoseconds.
type SpikeConfig struct {
	// Timers lists the spike sizes, each measured on its own.
	Timers []int `json:"timers"`
	// Impls lists the implementations, in the order each round runs
	// them: closure (s.AfterFunc), handler (h.AfterFunc), afterfunc
	// (time.AfterFunc).
	Impls []string `json:"impls"`
	Runs  int      `json:"runs"`
	// Producers is how many goroutines schedule (and cancel) the spike.
	Producers int           `json:"producers"`
	Delay     time.Duration `json:"delay_ns"`
	// Churn runs a proxy's steady churn throughout: ChurnGoroutines
	// goroutines scheduling ChurnRate timers of ChurnDelay a second in
	// all, each cancelling the timer it scheduled Ring iterations
	// earlier, through the implementation under test. Warmup is the
	// churn's time before the pre-spike measurement.
	Churn           bool          `json:"churn"`
	ChurnRate       float64       `json:"churn_rate"`
	ChurnGoroutines int           `json:"churn_goroutines"`
	Ring            int           `json:"cancel_after"`
	ChurnDelay      time.Duration `json:"churn_delay_ns"`
	Warmup          time.Duration `json:"warmup_ns"`
	// Wait bounds the samples after the spike: every Every, until the
	// run comes back (Targets) or Wait has passed.
	Wait  time.Duration `json:"wait_ns"`
	Every time.Duration `json:"sample_every_ns"`
	// StatsEvery is how far apart shardwheel's Stats are read during
	// those samples, as a metrics scraper reads them (0: not at all).
	// A read wakes an idle shard goroutine, whose pass does the work
	// that gives a spike's memory back.
	StatsEvery time.Duration `json:"stats_every_ns,omitempty"`
	GCs        int           `json:"gcs_per_sample"`
	Targets    spikeTargets  `json:"targets"`
	// shardwheel's configuration, and GOMAXPROCS of every run.
	Shards     int           `json:"shards"`
	Tick       time.Duration `json:"tick_ns"`
	Affinity   bool          `json:"affinity,omitempty"`
	GOMAXPROCS int           `json:"gomaxprocs"`
}

// defaultSpikeConfig is the spike BENCHMARKS.md reports: 1M and 10M
// timers, the three implementations, churn on, one run of each (about
// two and a half minutes on 2 CPUs).
func defaultSpikeConfig() SpikeConfig {
	return SpikeConfig{Timers: []int{1_000_000, 10_000_000}, Impls: slices.Clone(spikeImpls), Runs: 1, Producers: 2, Delay: spikeDelay,
		Churn: true, ChurnRate: 200_000, ChurnGoroutines: 2, Ring: churnRing, ChurnDelay: churnDelay, Warmup: 2 * time.Second,
		Wait: 30 * time.Second, Every: spikeEvery, GCs: spikeGCs, Targets: defaultSpikeTargets}
}

// spikeMaxTimers bounds -timers: the arena of one shard holds 2^26
// timers, and 100M time.AfterFunc timers take some 17 GB.
const spikeMaxTimers = 100_000_000

// spikeMaxChurnLife bounds a churn timer's life (-cancel-after times
// -churn-goroutines over -churn-rate): well within its 30s delay, so that
// none fires.
const spikeMaxChurnLife = 10 * time.Second

// validate rejects values no run can use, naming the first bad flag.
func (c *SpikeConfig) validate() error {
	if len(c.Timers) == 0 {
		return badFlag("timers", "\"\"", "must list at least one size")
	}
	for _, n := range c.Timers {
		if n < 1 || n > spikeMaxTimers {
			return badFlag("timers", n, "must be in [1, 1e8]")
		}
	}
	if len(c.Impls) == 0 {
		return badFlag("impls", "\"\"", "must list at least one of "+strings.Join(spikeImpls, ","))
	}
	for _, impl := range c.Impls {
		if !slices.Contains(spikeImpls, impl) {
			return badFlag("impls", fmt.Sprintf("%q", impl), "must be one of "+strings.Join(spikeImpls, ","))
		}
	}
	checks := []struct {
		bad        bool
		name, rule string
		value      any
	}{
		{c.Runs < 1, "runs", "must be >= 1", c.Runs},
		{c.Producers < 1 || c.Producers > 1024, "producers", "must be in [1, 1024]", c.Producers},
		{c.Wait < 0, "wait", "must not be negative", c.Wait},
		{!(c.ChurnRate > 0) || c.ChurnRate > maxRate, "churn-rate", "must be in (0, 1e8]", c.ChurnRate},
		{c.ChurnGoroutines < 1 || c.ChurnGoroutines > churnMaxGoroutines, "churn-goroutines", fmt.Sprintf("must be in [1, %d]", churnMaxGoroutines), c.ChurnGoroutines},
		{!validRing(c.Ring), "cancel-after", fmt.Sprintf("must be a power of two in [1, %d]", churnMaxRing), c.Ring},
		{c.Warmup < 0, "warmup", "must not be negative", c.Warmup},
		{c.StatsEvery < 0, "stats-every", "must not be negative", c.StatsEvery},
	}
	for _, ch := range checks {
		if ch.bad {
			return badFlag(ch.name, ch.value, ch.rule)
		}
	}
	if life := c.churnLife(); c.Churn && life > spikeMaxChurnLife {
		return badFlag("cancel-after", c.Ring, fmt.Sprintf("keeps a churn timer %v at -churn-rate %v and -churn-goroutines %d: "+
			"must be at most %v, well within its %v delay", life.Round(time.Millisecond), c.ChurnRate, c.ChurnGoroutines, spikeMaxChurnLife, c.ChurnDelay))
	}
	return nil
}

// churnLife is how long a churn timer lives before its Cancel.
func (c *SpikeConfig) churnLife() time.Duration {
	return time.Duration(float64(c.Ring) * float64(c.ChurnGoroutines) / c.ChurnRate * float64(time.Second))
}

// runs is the number of child runs c makes.
func (c *SpikeConfig) runs() int { return c.Runs * len(c.Timers) * len(c.Impls) }

// expectRun is about how long one run of impl at n timers takes: the
// process, the churn's warm-up, two spikes scheduled, measured and
// cancelled (about 1.5µs a timer in all), and the come-back: the whole
// wait for time.AfterFunc, whose timer heaps never shrink, and a few
// seconds for shardwheel.
func (c *SpikeConfig) expectRun(impl string, n int) time.Duration {
	d := time.Second + time.Duration(n)*1500*time.Nanosecond
	if c.Churn {
		d += c.Warmup
	}
	if impl == spikeStd {
		return d + c.Wait
	}
	return d + min(c.Wait, 3*time.Second+time.Duration(n)*500*time.Nanosecond)
}

// expect lists the expected time of every run, in the order they run.
func (c *SpikeConfig) expect() []time.Duration {
	var out []time.Duration
	for range c.Runs {
		for _, n := range c.Timers {
			for _, impl := range c.Impls {
				out = append(out, c.expectRun(impl, n))
			}
		}
	}
	return out
}

// Spike is the spike command's document.
type Spike struct {
	Host        Host
	Config      SpikeConfig
	Results     *SpikeResults
	Interrupted bool
}

// SpikeResults are the runs and their summaries.
type SpikeResults struct {
	// Runs in the order they ran.
	Runs []SpikeRun `json:"runs"`
	// Summaries: for each spike size, one per implementation in the
	// config's order, over its runs.
	Summaries []SpikeSummary `json:"summaries"`
}

// SpikeSummary is one implementation's runs at one spike size: each
// figure's median and range (see spikeRows for the keys), and counts.
type SpikeSummary struct {
	Impl    string            `json:"impl"`
	Call    string            `json:"call"`
	Timers  int               `json:"timers"`
	Runs    int               `json:"runs"`
	Figures map[string]spread `json:"figures"`
	// CameBack counts the runs that met the come-back criterion within
	// the wait; Met those that did so within Targets.Within. The
	// come_back figure covers the runs that came back only.
	CameBack int `json:"came_back_runs"`
	Met      int `json:"met_target_runs"`
	// Busy counts the runs during which other processes kept the host
	// busy; Behind those whose churn fell below 98% of its rate;
	// ChurnMissed the churn's cancels that returned false (must be 0).
	Busy        int   `json:"busy_runs,omitempty"`
	Behind      int   `json:"churn_behind_runs,omitempty"`
	ChurnMissed int64 `json:"churn_cancels_missed,omitempty"`
}

// spikeRow is one row of a spike table.
type spikeRow struct {
	key, label string
	// better is "lower", or "" for a figure that rates nothing.
	better string
	// get returns the run's figure, and false where it has none (the
	// node counts of time.AfterFunc, the come-back of a run that did not
	// come back).
	get  func(r *SpikeRun) (float64, bool)
	show func(v float64) string
}

// spikeRows are the rows of a spike table, in order.
func spikeRows() []spikeRow {
	heap := func(f func(r *SpikeRun) spikeSample) func(r *SpikeRun) (float64, bool) {
		return func(r *SpikeRun) (float64, bool) { return float64(f(r).Heap), true }
	}
	gc := func(f func(r *SpikeRun) spikeSample) func(r *SpikeRun) (float64, bool) {
		return func(r *SpikeRun) (float64, bool) { return float64(f(r).GC), true }
	}
	nodes := func(f func(r *SpikeRun) *spikeNodes) func(r *SpikeRun) (float64, bool) {
		return func(r *SpikeRun) (float64, bool) {
			if n := f(r); n != nil {
				return float64(n.Allocated), true
			}
			return 0, false
		}
	}
	before := func(r *SpikeRun) spikeSample { return r.Before }
	peak := func(r *SpikeRun) spikeSample { return r.Peak }
	after := func(r *SpikeRun) spikeSample { return r.After }
	pct := func(v float64) string { return units.Sig(100*v) + "%" }
	times := func(v float64) string { return units.Sig(v) + "x" }
	return []spikeRow{
		{"heap_before", "heap before", "", heap(before), showBytes},
		{"heap_peak", "heap at peak", "lower", heap(peak), showBytes},
		{"heap_after", "heap after", "lower", heap(after), showBytes},
		{"kept", "kept of the spike's heap growth", "lower", func(r *SpikeRun) (float64, bool) { return kept(r.Before, r.Peak, r.After), true }, pct},
		{"gc_before", "forced GC before", "", gc(before), showDur},
		{"gc_peak", "forced GC at peak", "lower", gc(peak), showDur},
		{"gc_after", "forced GC after", "lower", gc(after), showDur},
		{"gc_ratio", "forced GC after / before", "lower", func(r *SpikeRun) (float64, bool) {
			if r.Before.GC <= 0 {
				return 0, false
			}
			return float64(r.After.GC) / float64(r.Before.GC), true
		}, times},
		{"come_back", "came back after", "", func(r *SpikeRun) (float64, bool) { return float64(r.ComeBack), r.CameBack }, showDur},
		{"nodes_before", "nodes allocated before", "", nodes(func(r *SpikeRun) *spikeNodes { return r.Before.Nodes }), units.SI},
		{"nodes_peak", "nodes allocated at peak", "", nodes(func(r *SpikeRun) *spikeNodes { return r.Peak.Nodes }), units.SI},
		{"nodes_after", "nodes allocated after", "", nodes(func(r *SpikeRun) *spikeNodes { return r.After.Nodes }), units.SI},

		{"second_growth", "second spike's heap growth / first's", "", func(r *SpikeRun) (float64, bool) {
			g := r.Peak.Heap - r.Before.Heap
			if g <= 0 {
				return 0, false
			}
			return float64(r.Second.Heap-r.Before.Heap) / float64(g), true
		}, times},
		{"nodes_second", "nodes allocated at the second peak", "", nodes(func(r *SpikeRun) *spikeNodes { return r.Second.Nodes }), units.SI},
		{"blocks_released", "blocks released by the second spike's peak", "", func(r *SpikeRun) (float64, bool) {
			if r.Second.Nodes == nil {
				return 0, false
			}
			return float64(r.Second.Nodes.BlocksReleased), true
		}, units.Sig},
		{"blocks_remade", "blocks re-made by the second spike", "", func(r *SpikeRun) (float64, bool) {
			if r.Second.Nodes == nil {
				return 0, false
			}
			return float64(r.Second.Nodes.BlocksRemade), true
		}, units.Sig},
	}
}

// spikeCommand runs the spike's rounds: in each, every size, and at each
// the implementations in the config's order, one fresh process per run.
// When ctx is done it returns what was measured so far.
func spikeCommand(ctx context.Context, o options, p *progress) (*Spike, error) {
	c := o.spike
	doc := &Spike{Host: host(), Config: c, Results: &SpikeResults{}}
	pl := newPlan(p, "spike", c.expect())
	defer func() {
		doc.Results.summarize(c)
		doc.Interrupted = ctx.Err() != nil
	}()
	for round := 1; round <= c.Runs; round++ {
		for _, n := range c.Timers {
			for _, impl := range c.Impls {
				if ctx.Err() != nil {
					return doc, nil
				}
				pl.start(fmt.Sprintf("spike of %s timers, run %d of %d: %s", groupDigits(n), round, c.Runs, spikeCall(impl)))
				r, err := spikeOnce(ctx, c, impl, n, p.w)
				if err != nil {
					if ctx.Err() != nil {
						return doc, nil // an interrupted run is incomplete: it is left out
					}
					return doc, err
				}
				r.Round = round
				doc.Results.Runs = append(doc.Results.Runs, r)
				p.note("  %s", r.progressLine(c.Targets))
			}
		}
	}
	return doc, nil
}

// progressLine is what a finished run reports on stderr.
func (r *SpikeRun) progressLine(t spikeTargets) string {
	back := fmt.Sprintf("not back within %s", showDur(float64(r.After.At)))
	if r.CameBack {
		back = "back after " + showDur(float64(r.ComeBack))
	}
	return fmt.Sprintf("heap %s -> %s -> %s (kept %s%%), forced GC %s -> %s -> %s: %s", showBytes(float64(r.Before.Heap)),
		showBytes(float64(r.Peak.Heap)), showBytes(float64(r.After.Heap)), units.Sig(100*kept(r.Before, r.Peak, r.After)),
		showDur(float64(r.Before.GC)), showDur(float64(r.Peak.GC)), showDur(float64(r.After.GC)), back)
}

// spikeOnce runs impl at n timers in a child process and returns what it
// measured.
func spikeOnce(ctx context.Context, c SpikeConfig, impl string, n int, stderr io.Writer) (SpikeRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return SpikeRun{}, err
	}
	child := spikeChild{impl: impl, timers: n, producers: c.Producers, churn: c.Churn, rate: c.ChurnRate, churnG: c.ChurnGoroutines,
		ring: c.Ring, warmup: c.Warmup, wait: c.Wait, statsEvery: c.StatsEvery, shards: c.Shards, tick: c.Tick, affinity: c.Affinity, procs: c.GOMAXPROCS}
	cmd := exec.CommandContext(ctx, exe, child.args()...)
	// The child stops at once on an interrupt, as this process does.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	what := fmt.Sprintf("spike run (%s, %s timers)", spikeCall(impl), groupDigits(n))
	if err := cmd.Run(); err != nil {
		return SpikeRun{}, fmt.Errorf("%s: %w", what, err)
	}
	var r SpikeRun
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 16<<20)
	var last []byte
	for sc.Scan() {
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			last = slices.Clone(b)
		}
	}
	if err := json.Unmarshal(last, &r); err != nil || sc.Err() != nil {
		return r, fmt.Errorf("%s: reading its result %.200q: %w", what, last, errors.Join(err, sc.Err()))
	}
	return r, nil
}

// summarize computes the summaries of res's runs.
func (res *SpikeResults) summarize(c SpikeConfig) {
	res.Summaries = nil
	for _, n := range c.Timers {
		for _, impl := range c.Impls {
			var runs []*SpikeRun
			for i := range res.Runs {
				if r := &res.Runs[i]; r.Impl == impl && r.Timers == n {
					runs = append(runs, r)
				}
			}
			if len(runs) == 0 {
				continue
			}
			s := SpikeSummary{Impl: impl, Call: spikeCall(impl), Timers: n, Runs: len(runs), Figures: map[string]spread{}}
			for _, r := range runs {
				if r.CameBack {
					s.CameBack++
					if r.ComeBack <= c.Targets.Within {
						s.Met++
					}
				}
				if _, busy := otherBusy(r.OtherCPU, r.Wall, runtime.NumCPU()); busy {
					s.Busy++
				}
				if r.Churn && r.ChurnRate < 0.98*c.ChurnRate {
					s.Behind++
				}
				s.ChurnMissed += r.ChurnMissed
			}
			for _, row := range spikeRows() {
				var v []float64
				for _, r := range runs {
					if x, ok := row.get(r); ok {
						v = append(v, x)
					}
				}
				if len(v) > 0 {
					med, lo, hi := medianRange(v)
					s.Figures[row.key] = spread{med, lo, hi}
				}
			}
			res.Summaries = append(res.Summaries, s)
		}
	}
}

// summary returns the summary of impl at n timers, or nil.
func (res *SpikeResults) summary(n int, impl string) *SpikeSummary {
	for i := range res.Summaries {
		if s := &res.Summaries[i]; s.Timers == n && s.Impl == impl {
			return s
		}
	}
	return nil
}

// comeBackCell is the come-back row's cell of s: the median time and
// range of the runs that came back, and how many did not.
func (s *SpikeSummary) comeBackCell(wait time.Duration) string {
	f, ok := s.Figures["come_back"]
	switch {
	case !ok || s.CameBack == 0:
		return "not within " + units.Duration(wait)
	case s.CameBack == s.Runs:
		return withRange(showDur, f.Median, f.Min, f.Max)
	}
	return fmt.Sprintf("%s in %d of %d runs", withRange(showDur, f.Median, f.Min, f.Max), s.CameBack, s.Runs)
}

// targetCell is the target row's cell of s.
func (s *SpikeSummary) targetCell() string {
	switch s.Met {
	case s.Runs:
		if s.Runs == 1 {
			return "met"
		}
		return fmt.Sprintf("met in all %d runs", s.Runs)
	case 0:
		return "missed"
	}
	return fmt.Sprintf("met in %d of %d runs", s.Met, s.Runs)
}

// shortDuration formats d as time.Duration does, without the zero
// minutes and seconds of whole hours and minutes: 1h, 30m, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mode names the runs' setting: with churn or idle, and how often
// Stats were read.
func (c *SpikeConfig) mode() string {
	m := "idle (no churn)"
	if c.Churn {
		m = "with churn"
	}
	if c.StatsEvery > 0 {
		m += ", Stats read every " + shortDuration(c.StatsEvery)
	}
	return m
}

// describe writes the load's description for the report's header.
func (c *SpikeConfig) describe(b *strings.Builder) {
	fmt.Fprintf(b, "spike: N timers due in %s scheduled at once from %s, then all cancelled; then, once the heap and forced GC\n",
		shortDuration(c.Delay), plural(c.Producers, "goroutine"))
	b.WriteString("       came back (or the wait was over), a second spike of N\n")
	if c.Churn {
		fmt.Fprintf(b, "churn throughout: %s timers/s from %s, each a %v timer cancelled %s iterations later; %v of it before the spike\n",
			units.SI(c.ChurnRate), plural(c.ChurnGoroutines, "goroutine"), c.ChurnDelay, groupDigits(c.Ring), c.Warmup)
	} else {
		b.WriteString("idle: no churn; nothing but the spike touches the timers\n")
	}
	fmt.Fprintf(b, "came back: heap within %s%% of the spike's growth above before, and forced GC <= %sx before + %v;\n",
		units.Sig(100*c.Targets.HeapShare), units.Sig(c.Targets.GCFactor), c.Targets.GCSlack)
	fmt.Fprintf(b, "  sampled every %v after the last Cancel returned, for up to %v; target: within %v\n", c.Every, c.Wait, c.Targets.Within)
	if c.StatsEvery > 0 {
		fmt.Fprintf(b, "shardwheel's Stats read during the samples, at least %v apart, as a metrics scraper does: a read wakes idle shards\n", c.StatsEvery)
	} else {
		b.WriteString("shardwheel's Stats read before the spike, at the peaks (once the shards had filed the spike) and after the sampling only\n")
	}
	runs := plural(c.Runs, "run") + " of each"
	if len(c.Impls) > 1 {
		runs += ", interleaved"
	}
	fmt.Fprintf(b, "one fresh process per run, %s; GOMAXPROCS %d; shardwheel: %s, tick %v%s\n",
		runs, c.GOMAXPROCS, plural(c.Shards, "shard"), c.Tick, affinityNote(c.Affinity))
}

// writeText writes the spike report: one table per size, the notes and
// the verdict.
func (sp *Spike) writeText(w io.Writer) error {
	var b strings.Builder
	c, res := sp.Config, sp.Results
	fmt.Fprintf(&b, "a spike comes back, %s: shardwheel vs time.AfterFunc on %s\n", c.mode(), sp.Host)
	c.describe(&b)
	for _, n := range c.Timers {
		sums := make([]*SpikeSummary, len(c.Impls))
		runs := 0
		for i, impl := range c.Impls {
			sums[i] = res.summary(n, impl)
			if sums[i] != nil {
				runs = max(runs, sums[i].Runs)
			}
		}
		if runs == 0 {
			fmt.Fprintf(&b, "\n%s timers: not measured\n", groupDigits(n))
			continue
		}
		what := "median (min-max) of " + plural(runs, "run")
		if runs == 1 {
			what = "one run"
		}
		fmt.Fprintf(&b, "\n%s timers, %s: %s\n", groupDigits(n), c.mode(), what)
		t := &table{align: "l" + strings.Repeat("r", len(c.Impls)) + "l"}
		head := []string{""}
		for _, impl := range c.Impls {
			head = append(head, spikeCall(impl))
		}
		t.add(append(head, "winner")...)
		for _, row := range spikeRows() {
			cells := []string{"  " + row.label}
			shown := false
			for _, s := range sums {
				cell := "-"
				if s != nil {
					if f, ok := s.Figures[row.key]; ok {
						cell, shown = withRange(row.show, f.Median, f.Min, f.Max), true
					}
					if row.key == "come_back" {
						cell, shown = s.comeBackCell(c.Wait), true
					}
				}
				cells = append(cells, cell)
			}
			if shown {
				t.add(append(cells, spikeWinner(row, sums, spikeCall))...)
			}
		}
		cells := []string{fmt.Sprintf("  target: came back within %v", c.Targets.Within)}
		for _, s := range sums {
			if s == nil {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, s.targetCell())
		}
		t.add(append(cells, "")...)
		if err := t.write(&b); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	for _, n := range res.notes(c) {
		b.WriteString(n + "\n")
	}
	if sp.Interrupted {
		fmt.Fprintf(&b, "INTERRUPTED: %d of %s finished; the figures cover those.\n", len(res.Runs), plural(c.runs(), "run"))
	}
	writeVerdict(&b, res.verdict(c))
	_, err := io.WriteString(w, b.String())
	return err
}

// spikeWinner is the winner cell of row over sums (nil where not
// measured), the implementations named by name: see pickWinner; "" for a
// row that rates nothing.
func spikeWinner(row spikeRow, sums []*SpikeSummary, name func(impl string) string) string {
	var cs []candidate
	for _, s := range sums {
		if s == nil {
			continue
		}
		f, ok := s.Figures[row.key]
		cs = append(cs, candidate{name: name(s.Impl), med: f.Median, lo: f.Min, hi: f.Max, ok: ok})
	}
	return pickWinner(row.better, cs...)
}

// notes are what the spike tables need said: how to read them and what
// went wrong.
func (res *SpikeResults) notes(c SpikeConfig) []string {
	notes := []string{
		"heap: the process's heap objects (MemStats.HeapAlloc) right after forced collections; at the peaks, less the run's own",
		"  slice of the spike's handles (a shardwheel.Timer or *time.Timer per timer), which the peak's collections scan all the same.",
		fmt.Sprintf("forced GC: the wall time of runtime.GC(), the median of %d in a row (%d before the spike); on a busy host it moves by",
			c.GCs, spikeBaseGCs),
		"  milliseconds from one collection to the next. kept: (heap after - before) / (heap at peak - before).",
		"after: the sample that came back, or the last one. nodes, blocks: shardwheel's Stats (NodesAllocated, BlocksReleased, BlocksRemade),",
		"  after: read once the sampling was over.",
		fmt.Sprintf("winner: the lower figure; \"tie\" within %.0f%% or where the runs' ranges overlap.", 100*tieWithin),
	}
	for _, s := range res.Summaries {
		who := fmt.Sprintf("%s, %s timers", s.Call, groupDigits(s.Timers))
		if s.ChurnMissed > 0 {
			notes = append(notes, fmt.Sprintf("ERROR: %s: %s of a pending churn timer returned false.", who, plural(int(s.ChurnMissed), "cancel")))
		}
		if s.Behind > 0 {
			notes = append(notes, fmt.Sprintf("WARNING: %s: the churn fell below 98%% of %s timers/s in %d of %s.",
				who, units.SI(c.ChurnRate), s.Behind, plural(s.Runs, "run")))
		}
		if s.Busy > 0 {
			notes = append(notes, fmt.Sprintf("WARNING: %s: other processes kept the host busy during %d of %s: forced GC times move with them.",
				who, s.Busy, plural(s.Runs, "run")))
		}
	}
	return notes
}

// verdict sums up the spike: per size, each implementation's kept share,
// GC ratio and come-back, and for shardwheel the second spike. Its
// ratios are keyed <timers>/<impl>/<key> for the keys kept, gc_ratio and
// second_growth (medians); its winners <timers>/<key>, one for every row
// that rates, valued by call.
func (res *SpikeResults) verdict(c SpikeConfig) Verdict {
	v := Verdict{Ratios: map[string]float64{}, Winners: map[string]string{}}
	for _, n := range c.Timers {
		var parts []string
		sums := make([]*SpikeSummary, len(c.Impls))
		for i, impl := range c.Impls {
			s := res.summary(n, impl)
			sums[i] = s
			if s == nil {
				continue
			}
			for _, key := range []string{"kept", "gc_ratio", "second_growth"} {
				if f, ok := s.Figures[key]; ok {
					v.Ratios[fmt.Sprintf("%d/%s/%s", n, impl, key)] = f.Median
				}
			}
			k, g := s.Figures["kept"], s.Figures["gc_ratio"]
			part := fmt.Sprintf("%s kept %s%% of its heap growth, forced GC %sx its time before", s.Call, units.Sig(100*k.Median), units.Sig(g.Median))
			switch {
			case s.CameBack == 0:
				part += ", not back within " + units.Duration(c.Wait)
			default:
				part += ", back after " + showDur(s.Figures["come_back"].Median)
				if s.CameBack < s.Runs {
					part += fmt.Sprintf(" in %d of %d runs", s.CameBack, s.Runs)
				}
			}
			part += " (target " + s.targetCell() + ")"
			if sg, ok := s.Figures["second_growth"]; ok && impl != spikeStd {
				part += fmt.Sprintf("; a second spike grew %sx the first", units.Sig(sg.Median))
			}
			parts = append(parts, part)
		}
		if len(parts) > 0 {
			v.Summary = append(v.Summary, fmt.Sprintf("spike of %s timers, %s: %s.", groupDigits(n), c.mode(), strings.Join(parts, "; ")))
		}
		for _, row := range spikeRows() {
			if w := spikeWinner(row, sums, func(impl string) string { return impl }); w != "" {
				v.Winners[fmt.Sprintf("%d/%s", n, row.key)] = w
			}
		}
	}
	var missed int64
	for _, s := range res.Summaries {
		missed += s.ChurnMissed
	}
	if missed > 0 {
		v.Summary = append(v.Summary, fmt.Sprintf("spike: ERROR: %s of pending churn timers failed.", plural(int(missed), "cancel")))
	}
	return v
}

// envelope is spike's JSON document.
func (sp *Spike) envelope() envelope {
	v := sp.Results.verdict(sp.Config)
	return envelope{Host: sp.Host, Config: sp.Config, Results: sp.Results, Verdict: &v, Interrupted: sp.Interrupted}
}
