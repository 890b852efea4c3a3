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

// churn: the delayed-cancel load the library is judged on (see
// shared/FLOOR.md). Each of G goroutines loops: schedule a 30s timer, and
// cancel the one it scheduled 65,536 iterations earlier, 20-60ms before at
// these rates (a proxy's request timeouts, cancelled as the responses
// arrive); a million background timers are resident. Every run is a fresh
// process (churnrun.go), the implementations interleaved in rounds.

// ChurnConfig is the churn load's shape. JSON durations are integer
// nanoseconds.
type ChurnConfig struct {
	// Goroutines lists the goroutine counts to run, each a load of its own.
	Goroutines []int         `json:"goroutines"`
	Resident   int           `json:"resident"`
	Warmup     time.Duration `json:"warmup_ns"`
	Duration   time.Duration `json:"duration_ns"`
	Rounds     int           `json:"rounds"`
	// Ring is how many iterations after its Schedule a goroutine cancels
	// a timer (-cancel-after).
	Ring int `json:"cancel_after"`
	// The fixed shape, for the record.
	Delay      time.Duration `json:"delay_ns"`
	ProbeEvery int           `json:"probe_every"`
	ProbeDelay time.Duration `json:"probe_delay_ns"`
	// shardwheel's configuration.
	Shards   int           `json:"shards"`
	Tick     time.Duration `json:"tick_ns"`
	Affinity bool          `json:"affinity,omitempty"`
	// GOMAXPROCS of every run.
	GOMAXPROCS int `json:"gomaxprocs"`
	// WaitQuiet, if not 0, is how long to wait before each run for the
	// host to be quiet (-wait-quiet): other processes keeping fewer cores
	// busy than busyCores over a second. Linux only.
	WaitQuiet time.Duration `json:"wait_quiet_ns,omitempty"`
}

// defaultChurnConfig is the load as FLOOR.md measures it: 2 and 6
// goroutines, 1M resident, 2s of warm-up and 3s measured, 3 rounds.
func defaultChurnConfig() ChurnConfig {
	return ChurnConfig{Goroutines: []int{2, 6}, Resident: 1_000_000, Warmup: 2 * time.Second, Duration: 3 * time.Second, Rounds: 3,
		Delay: churnDelay, Ring: churnRing, ProbeEvery: churnProbeEvery, ProbeDelay: churnProbeDelay}
}

// validate rejects values no run can use, naming the first bad flag;
// prefix is the flags' prefix ("churn-" in compare).
func (c *ChurnConfig) validate(prefix string, allowNone bool) error {
	minRounds, rule := 1, "must be >= 1"
	if allowNone {
		minRounds, rule = 0, "must be >= 0 (0: no churn section)"
	}
	if c.Rounds < minRounds {
		return badFlag(prefix+"rounds", c.Rounds, rule)
	}
	if len(c.Goroutines) == 0 {
		return badFlag(prefix+"goroutines", "\"\"", "must list at least one count")
	}
	for _, g := range c.Goroutines {
		if g < 1 || g > churnMaxGoroutines {
			return badFlag(prefix+"goroutines", g, fmt.Sprintf("must be in [1, %d]", churnMaxGoroutines))
		}
	}
	checks := []struct {
		bad        bool
		name, rule string
		value      any
	}{
		{c.Resident < 0 || c.Resident > 100_000_000, "resident", "must be in [0, 1e8]", c.Resident},
		{!validRing(c.Ring), "cancel-after", fmt.Sprintf("must be a power of two in [1, %d]", churnMaxRing), c.Ring},
		{c.Warmup < 100*time.Millisecond, "warmup", "must be at least 100ms (the cancel rings fill during it)", c.Warmup},
		{c.Duration <= 0, "duration", "must be > 0", c.Duration},
		{c.WaitQuiet < 0, "wait-quiet", "must not be negative", c.WaitQuiet},
	}
	for _, ch := range checks {
		if ch.bad {
			return badFlag(prefix+ch.name, ch.value, ch.rule)
		}
	}
	return nil
}

// runs is the number of child runs c makes.
func (c *ChurnConfig) runs() int { return c.Rounds * len(c.Goroutines) * len(churnImpls) }

// expectRun is about how long one run takes: starting the process, the
// background timers, warm-up, the window, a collection and the exit.
func (c *ChurnConfig) expectRun() time.Duration {
	return c.Warmup + c.Duration + time.Duration(c.Resident)*time.Microsecond + time.Second
}

// ChurnResults are the runs of the churn load and their summaries.
type ChurnResults struct {
	// Runs in the order they ran.
	Runs []ChurnRun `json:"runs"`
	// Summaries: for each goroutine count, one per implementation in
	// churnImpls' order (time.AfterFunc first), over its runs.
	Summaries []ChurnSummary `json:"summaries"`
}

// ChurnSummary is one implementation's runs at one goroutine count: each
// figure's median and range, and its ratio to time.AfterFunc's median.
type ChurnSummary struct {
	Impl       string `json:"impl"`
	Call       string `json:"call"`
	Goroutines int    `json:"goroutines"`
	Runs       int    `json:"runs"`
	// Figures by key (see churnMetrics): median, min and max over the runs.
	Figures map[string]spread `json:"figures"`
	// Ratios are this implementation's medians over time.AfterFunc's, by
	// key; absent where AfterFunc's is 0. Empty for AfterFunc itself.
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// Totals over the runs: probes counted, probes that ran early (must
	// be 0) or never ran, cancels that failed (must be 0).
	Probes       int   `json:"probes"`
	ProbesEarly  int   `json:"probes_early"`
	ProbesLost   int   `json:"probes_lost"`
	CancelMissed int64 `json:"cancels_missed"`
	// FewestGC is the fewest GC cycles of a run: what the GC figures rest
	// on. (The probe percentiles rest on Probes: they pool the runs.)
	FewestGC uint64 `json:"fewest_gc_cycles"`
	// Busy counts the runs during which other processes kept the host
	// busy (busyCores, of the host's CPUs).
	Busy int `json:"busy_runs,omitempty"`
}

// spread is a figure over runs.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// churnMetric is one row of the churn table.
type churnMetric struct {
	key, label string
	better     string // "lower", "higher", or "" for a figure that rates nothing
	get        func(r *ChurnRun) float64
	show       func(v float64) string
	// noise says why the row's figures are noise for s, or "".
	noise func(s *ChurnSummary) string
}

func showDur(v float64) string   { return units.Duration(time.Duration(v)) }
func showBytes(v float64) string { return units.SI(v) + "B" }

// probeNoise marks percentiles of fewer than minSamples probes, over all
// of a summary's runs.
func probeNoise(s *ChurnSummary) string {
	if s.Probes < minSamples {
		return plural(s.Probes, "probe") + " in all"
	}
	return ""
}

// gcNoise marks GC figures of fewer than minGCCycles collections.
func gcNoise(s *ChurnSummary) string {
	if s.FewestGC < minGCCycles {
		return fmt.Sprintf("%s in a run", plural(int(s.FewestGC), "GC cycle"))
	}
	return ""
}

// churnMetrics are the rows of the churn table, in order.
func churnMetrics() []churnMetric {
	none := func(*ChurnSummary) string { return "" }
	return []churnMetric{
		{"cpu_per_pair", "CPU per schedule+cancel pair", "lower", func(r *ChurnRun) float64 { return r.CPUPerPair }, showDur, none},
		{"pairs_per_sec", "pairs/s (all goroutines)", "higher", func(r *ChurnRun) float64 { return r.PairsPerSec }, units.SI, none},
		{"allocs_per_pair", "allocations per pair", "lower", func(r *ChurnRun) float64 { return r.AllocsPerPair }, units.Sig, none},
		{"heap_objects", "heap object bytes, mean in window", "lower", func(r *ChurnRun) float64 { return float64(r.HeapObjects) }, showBytes, none},
		{"heap_live", "live heap after a GC at window end", "lower", func(r *ChurnRun) float64 { return float64(r.HeapLive) }, showBytes, none},
		{"gc_cycles", "GC cycles in window", "lower", func(r *ChurnRun) float64 { return float64(r.GC.Cycles) }, units.Sig, gcNoise},
		{"gc_cpu", "GC CPU time in window", "lower", func(r *ChurnRun) float64 { return float64(r.GC.CPU) }, showDur, gcNoise},
		{"probe_p50", "probe lateness p50", "lower", func(r *ChurnRun) float64 { return float64(r.Probes.P50) }, showDur, probeNoise},
		{"probe_p99", "probe lateness p99", "lower", func(r *ChurnRun) float64 { return float64(r.Probes.P99) }, showDur, probeNoise},
		{"probe_max", "probe lateness max", "lower", func(r *ChurnRun) float64 { return float64(r.Probes.Max) }, showDur, probeNoise},
		{"probes", "probes counted per run", "", func(r *ChurnRun) float64 { return float64(r.Probes.Count) }, units.SI, none},
		{"other_cpu", "other processes' CPU (cores busy)", "", func(r *ChurnRun) float64 {
			if r.Measured <= 0 {
				return 0
			}
			return r.OtherCPU.Seconds() / r.Measured.Seconds()
		}, units.Sig, none},
	}
}

// churnCompare runs c's rounds: in each, every goroutine count, and at
// each the implementations in churnImpls' order, one fresh process per
// run. When ctx is done it returns what was measured so far.
func churnCompare(ctx context.Context, c ChurnConfig, pl *plan, stderr io.Writer) (*ChurnResults, error) {
	res := &ChurnResults{}
	for round := 1; round <= c.Rounds; round++ {
		for _, g := range c.Goroutines {
			for _, impl := range churnImpls {
				if ctx.Err() != nil {
					res.summarize(c)
					return res, nil
				}
				pl.start(fmt.Sprintf("churn, %s, round %d of %d: %s", plural(g, "goroutine"), round, c.Rounds, churnCall(impl)))
				waited := waitQuiet(ctx, c.WaitQuiet, pl.p)
				r, err := churnOnce(ctx, c, impl, g, stderr)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					res.summarize(c)
					return res, err
				}
				r.Round, r.WaitedQuiet = round, waited
				res.Runs = append(res.Runs, r)
			}
		}
	}
	res.summarize(c)
	return res, nil
}

// waitQuiet waits, for at most limit, until other processes keep fewer
// cores busy than busyCores over a second, and returns how long it
// waited. It does not wait where the host's CPU time is unknown.
func waitQuiet(ctx context.Context, limit time.Duration, p *progress) time.Duration {
	if limit <= 0 || hostCPUTime() == 0 {
		return 0
	}
	start := time.Now()
	for said := false; ; said = true {
		h0, c0, t0 := hostCPUTime(), cpuTime(), time.Now()
		if sleepCtx(ctx, time.Second) != nil {
			return time.Since(start)
		}
		busy, isBusy := otherBusy(max(hostCPUTime()-h0-(cpuTime()-c0), 0), time.Since(t0), runtime.NumCPU())
		waited := time.Since(start)
		switch {
		case !isBusy:
			if said {
				p.note("  the host is quiet after %s", roundDuration(waited))
			}
			return waited
		case waited >= limit:
			p.note("  the host is still busy after %s (other processes: %s cores); measuring anyway", roundDuration(waited), units.Sig(busy))
			return waited
		case !said:
			p.note("  waiting up to %s for a quiet host (other processes keep %s cores busy)", limit, units.Sig(busy))
		}
	}
}

// churnOnce runs impl with g goroutines in a child process and returns
// what it measured.
func churnOnce(ctx context.Context, c ChurnConfig, impl string, g int, stderr io.Writer) (ChurnRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return ChurnRun{}, err
	}
	child := churnChild{impl: impl, goroutines: g, resident: c.Resident, ring: c.Ring, warmup: c.Warmup, duration: c.Duration,
		shards: c.Shards, tick: c.Tick, affinity: c.Affinity, procs: c.GOMAXPROCS}
	cmd := exec.CommandContext(ctx, exe, child.args()...)
	// The child stops at once on an interrupt, as this process does.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return ChurnRun{}, fmt.Errorf("churn run (%s, %s): %w", churnCall(impl), plural(g, "goroutine"), err)
	}
	var rep churnReport
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 64<<20) // a run's report holds every probe's lateness
	var last []byte
	for sc.Scan() {
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			last = slices.Clone(b)
		}
	}
	if err := json.Unmarshal(last, &rep); err != nil || sc.Err() != nil {
		return rep.Run, fmt.Errorf("churn run (%s, %s): reading its result %.200q: %w", churnCall(impl), plural(g, "goroutine"), last, errors.Join(err, sc.Err()))
	}
	rep.Run.probes = rep.Probes
	return rep.Run, nil
}

// summarize computes the summaries of res's runs.
func (res *ChurnResults) summarize(c ChurnConfig) {
	res.Summaries = nil
	for _, g := range c.Goroutines {
		var base *ChurnSummary
		for _, impl := range churnImpls {
			s := ChurnSummary{Impl: impl, Call: churnCall(impl), Goroutines: g, Figures: map[string]spread{}}
			var runs []*ChurnRun
			for i := range res.Runs {
				if r := &res.Runs[i]; r.Impl == impl && r.Goroutines == g {
					runs = append(runs, r)
				}
			}
			if len(runs) == 0 {
				continue
			}
			s.Runs = len(runs)
			s.FewestGC = runs[0].GC.Cycles
			var pooled []time.Duration
			for _, r := range runs {
				s.Probes += int(r.Probes.Count)
				s.ProbesEarly += r.ProbesEarly
				s.ProbesLost += r.ProbesLost
				s.CancelMissed += r.CancelMissed
				pooled = append(pooled, r.probes...)
				s.FewestGC = min(s.FewestGC, r.GC.Cycles)
				if _, busy := otherBusy(r.OtherCPU, r.Measured, runtime.NumCPU()); busy {
					s.Busy++
				}
			}
			for _, m := range churnMetrics() {
				v := make([]float64, len(runs))
				for i, r := range runs {
					v[i] = m.get(r)
				}
				med, lo, hi := medianRange(v)
				s.Figures[m.key] = spread{med, lo, hi}
			}
			// The probes' percentiles pool the runs' probes, when the runs
			// brought them (a JSON document read back has only each run's
			// own percentiles): a run's p99 of a few hundred probes is one
			// of its few largest; the range stays the runs' own.
			if len(pooled) == s.Probes && s.Probes > 0 {
				p := exactPercentiles(pooled)
				for key, v := range map[string]time.Duration{"probe_p50": p.P50, "probe_p99": p.P99, "probe_max": p.Max} {
					f := s.Figures[key]
					f.Median = float64(v)
					s.Figures[key] = f
				}
			}
			res.Summaries = append(res.Summaries, s)
			last := &res.Summaries[len(res.Summaries)-1]
			if impl == churnStd {
				base = last
				continue
			}
			if base == nil {
				continue
			}
			last.Ratios = map[string]float64{}
			for _, m := range churnMetrics() {
				if m.better == "" {
					continue
				}
				if q, ok := ratio(last.Figures[m.key].Median, base.Figures[m.key].Median); ok {
					last.Ratios[m.key] = q
				}
			}
		}
	}
}

// summary returns the summary of impl at g goroutines, or nil.
func (res *ChurnResults) summary(g int, impl string) *ChurnSummary {
	for i := range res.Summaries {
		if s := &res.Summaries[i]; s.Goroutines == g && s.Impl == impl {
			return s
		}
	}
	return nil
}

// describe writes the load's description for a report header.
func (c *ChurnConfig) describe(b *strings.Builder) {
	fmt.Fprintf(b, "load: each goroutine schedules a %v timer and cancels the one it scheduled %s iterations earlier\n",
		c.Delay, groupDigits(c.Ring))
	b.WriteString("      (request timeouts cancelled as the responses arrive); nothing fires\n")
	fmt.Fprintf(b, "      %s background timers resident (due in %s-%s, scheduled before the load starts)\n",
		groupDigits(c.Resident), units.Duration(churnBgMin), units.Duration(churnBgMin+churnBgSpread))
	fmt.Fprintf(b, "      every %s iterations a goroutine also schedules a %v probe timer, never cancelled, that records how late it runs\n",
		groupDigits(c.ProbeEvery), c.ProbeDelay)
	fmt.Fprintf(b, "calls: time.AfterFunc + Timer.Stop; s.AfterFunc + Timer.Cancel (no key); s.AfterFunc(..., ByKey(key)) + Timer.Cancel (a distinct key per timer)\n")
	fmt.Fprintf(b, "one fresh process per run, %s of the three in turn; %v measured after %v warm-up; GOMAXPROCS %d; shardwheel: %s, tick %v%s\n",
		plural(c.Rounds, "round"), c.Duration, c.Warmup, c.GOMAXPROCS, plural(c.Shards, "shard"), c.Tick, affinityNote(c.Affinity))
	if c.WaitQuiet > 0 {
		fmt.Fprintf(b, "each run first waited up to %v for a quiet host\n", c.WaitQuiet)
	}
}

// groupDigits writes n with thousands separators: 65,536.
func groupDigits(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeTables writes one table per goroutine count, and the notes.
func (res *ChurnResults) writeTables(b *strings.Builder, c ChurnConfig) error {
	for _, g := range c.Goroutines {
		sums := make([]*ChurnSummary, len(churnImpls))
		runs := 0
		for i, impl := range churnImpls {
			sums[i] = res.summary(g, impl)
			if sums[i] != nil {
				runs = max(runs, sums[i].Runs)
			}
		}
		if runs == 0 {
			fmt.Fprintf(b, "\n%s: not measured\n", plural(g, "goroutine"))
			continue
		}
		what := "median (min-max) of " + plural(runs, "run")
		if runs == 1 {
			what = "one run"
		}
		fmt.Fprintf(b, "\n%s on GOMAXPROCS %d: %s; ratio to time.AfterFunc after each figure\n", plural(g, "goroutine"), c.GOMAXPROCS, what)
		t := &table{align: "lrrrl"}
		head := []string{""}
		for _, impl := range churnImpls {
			head = append(head, churnCall(impl))
		}
		t.add(append(head, "winner")...)
		for _, m := range churnMetrics() {
			row := []string{"  " + m.label}
			for i, s := range sums {
				if s == nil {
					row = append(row, "-")
					continue
				}
				f := s.Figures[m.key]
				cell := withRange(m.show, f.Median, f.Min, f.Max)
				if q, ok := s.Ratios[m.key]; ok {
					cell += " " + fmtRatio(q, true)
				} else if i > 0 && m.better != "" {
					cell += " n/a"
				}
				row = append(row, cell)
			}
			t.add(append(row, churnWinner(m, sums, churnCall))...)
		}
		if err := t.write(b); err != nil {
			return err
		}
	}
	return nil
}

// churnWinner is the winner cell of m's row over sums (one per
// implementation, in churnImpls' order, nil where not measured), the
// implementations named by name: the one whose median is better, "tie",
// "a = b", "noise: <why>", or "" for a row that rates nothing or has
// fewer than two implementations measured. The table names them by call,
// the JSON verdict by implementation.
func churnWinner(m churnMetric, sums []*ChurnSummary, name func(impl string) string) string {
	var cs []candidate
	noise := ""
	for i, s := range sums {
		if s == nil {
			continue
		}
		f := s.Figures[m.key]
		cs = append(cs, candidate{name: name(churnImpls[i]), med: f.Median, lo: f.Min, hi: f.Max, ok: true})
		if n := m.noise(s); n != "" && noise == "" {
			noise = n
		}
	}
	win := pickWinner(m.better, cs...)
	if noise != "" && win != "" {
		win = winNoise + ": " + noise
	}
	return win
}

// notes are what the churn tables need said: how to read them and what
// went wrong.
func (res *ChurnResults) notes(c ChurnConfig) []string {
	notes := []string{
		"CPU per pair: the process's user+system CPU over the window (getrusage) / the cancels in it, everything included:",
		"  the loop, the task closures (one allocation per Schedule, the same for all three), the runtime's or the wheel's",
		"  goroutines, the GC. pairs/s is what G goroutines managed flat out (closed loop): higher is faster, not more offered.",
		"Heap object bytes: /memory/classes/heap/objects:bytes (live objects and garbage not yet swept) sampled every 50ms in the",
		"  window; live heap: /gc/heap/live:bytes after a collection forced right after the window, the load still running.",
		"Other processes' CPU: the host's busy time (/proc/stat) less this run's, over the window (Linux only; 0 elsewhere).",
		"Probe lateness: task start - (clock read before the Schedule call + 5ms), of the probes due in the window. The",
		"  figure is the percentile of all the runs' probes together; the range, the runs' own percentiles. shardwheel",
		"  rounds deadlines up to its tick, so by design its probes run up to a tick late, plus its tick lag.",
		fmt.Sprintf("winner: the better figure; \"tie\" within %.0f%% or where the runs' ranges overlap; \"noise\" where a figure rests on",
			100*tieWithin),
		fmt.Sprintf("  fewer than %d probes in all or %d GC cycles in a run.", minSamples, minGCCycles),
	}
	busy, runs := 0, 0
	var busyOf []string // "s.AfterFunc, 2 goroutines: 1 of 3", one per summary with busy runs
	for _, s := range res.Summaries {
		who := fmt.Sprintf("%s, %s", churnCall(s.Impl), plural(s.Goroutines, "goroutine"))
		if s.ProbesEarly > 0 {
			notes = append(notes, fmt.Sprintf("ERROR: %s: %s ran before its deadline.", who, plural(s.ProbesEarly, "probe")))
		}
		if s.CancelMissed > 0 {
			notes = append(notes, fmt.Sprintf("ERROR: %s: %s of a pending 30s timer returned false.", who, plural(int(s.CancelMissed), "cancel")))
		}
		if s.ProbesLost > 0 {
			notes = append(notes, fmt.Sprintf("WARNING: %s: %s due in the window had not run %v after it; the lateness leaves them out.",
				who, plural(s.ProbesLost, "probe"), churnProbeWait))
		}
		busy, runs = busy+s.Busy, runs+s.Runs
		if s.Busy > 0 {
			busyOf = append(busyOf, fmt.Sprintf("%s: %d of %d", who, s.Busy, s.Runs))
		}
	}
	if busy > 0 {
		notes = append(notes, fmt.Sprintf("WARNING: other processes kept the host busy during %d of %s (%s): such a run gets less",
			busy, plural(runs, "run"), strings.Join(busyOf, "; ")),
			"  of the CPUs, and its figures move, CPU per pair included, either way; rerun with -wait-quiet (compare: -churn-wait-quiet).")
	}
	return notes
}

// verdict sums up the churn tables: per goroutine count, each
// shardwheel call's ratios to time.AfterFunc and the probes side by side.
// Its ratios are keyed g<G>/<impl>/<metric>, for the impls wheel and
// keyed and the metrics cpu_per_pair, heap_objects and gc_cycles (not
// where its GC cycles are noise); its winners g<G>/<metric>, one for
// every row of the table that shows one, valued by implementation
// (afterfunc, wheel, keyed, "wheel = keyed", "tie" or "noise: <why>").
func (res *ChurnResults) verdict(c ChurnConfig) Verdict {
	v := Verdict{Ratios: map[string]float64{}, Winners: map[string]string{}}
	for _, g := range c.Goroutines {
		base := res.summary(g, churnStd)
		var parts []string
		for _, impl := range churnImpls[1:] {
			s := res.summary(g, impl)
			if s == nil || base == nil {
				continue
			}
			var fs []string
			for _, f := range []struct{ key, name string }{{"cpu_per_pair", "CPU"}, {"heap_objects", "heap object bytes"}, {"gc_cycles", "GC cycles"}} {
				q, ok := s.Ratios[f.key]
				switch {
				case f.key == "gc_cycles" && (gcNoise(s) != "" || gcNoise(base) != ""):
					fs = append(fs, fmt.Sprintf("%s %s vs %s (noise)", f.name,
						units.Sig(s.Figures[f.key].Median), units.Sig(base.Figures[f.key].Median)))
				case ok:
					fs = append(fs, f.name+" "+fmtRatio(q, true))
					v.Ratios[fmt.Sprintf("g%d/%s/%s", g, impl, f.key)] = q
				}
			}
			pn := ""
			if probeNoise(s) != "" || probeNoise(base) != "" {
				pn = " (noise: few probes)"
			}
			fs = append(fs, fmt.Sprintf("probes p50 %s vs %s, p99 %s vs %s%s",
				showDur(s.Figures["probe_p50"].Median), showDur(base.Figures["probe_p50"].Median),
				showDur(s.Figures["probe_p99"].Median), showDur(base.Figures["probe_p99"].Median), pn))
			parts = append(parts, churnCall(impl)+": "+strings.Join(fs, ", "))
		}
		if len(parts) > 0 {
			v.Summary = append(v.Summary, fmt.Sprintf("churn, %s, against time.AfterFunc: %s.", plural(g, "goroutine"), strings.Join(parts, "; ")))
		}
		sums := make([]*ChurnSummary, len(churnImpls))
		for i, impl := range churnImpls {
			sums[i] = res.summary(g, impl)
		}
		for _, m := range churnMetrics() {
			if w := churnWinner(m, sums, func(impl string) string { return impl }); w != "" {
				v.Winners[fmt.Sprintf("g%d/%s", g, m.key)] = w
			}
		}
	}
	var early, missed int
	for _, s := range res.Summaries {
		early += s.ProbesEarly
		missed += int(s.CancelMissed)
	}
	if len(res.Runs) > 0 {
		if early == 0 && missed == 0 {
			v.Summary = append(v.Summary, "churn: no probe ran early, no cancel of a pending timer failed.")
		} else {
			v.Summary = append(v.Summary, fmt.Sprintf("churn: ERROR: %s ran early, %s of pending timers failed.",
				plural(early, "probe"), plural(missed, "cancel")))
		}
	}
	return v
}

// Churn is the churn command's document.
type Churn struct {
	Host        Host
	Config      ChurnConfig
	Results     *ChurnResults
	Interrupted bool
}

// churnCommand runs the churn load alone.
func churnCommand(ctx context.Context, o options, p *progress) (*Churn, error) {
	c := o.churn
	doc := &Churn{Host: host(), Config: c, Results: &ChurnResults{}}
	pl := newPlan(p, "churn", repeat(c.expectRun(), c.runs()))
	res, err := churnCompare(ctx, c, pl, p.w)
	doc.Results = res
	doc.Interrupted = ctx.Err() != nil
	return doc, err
}

// repeat returns n copies of d.
func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// writeText writes the churn report.
func (ch *Churn) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "delayed-cancel churn: time.AfterFunc vs shardwheel on %s\n", ch.Host)
	if err := writeChurnSection(&b, ch.Config, ch.Results, ch.Interrupted); err != nil {
		return err
	}
	v := ch.Results.verdict(ch.Config)
	writeVerdict(&b, v)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeChurnSection writes the load, its tables and notes: the churn
// command's body, and compare's second section.
func writeChurnSection(b *strings.Builder, c ChurnConfig, res *ChurnResults, interrupted bool) error {
	c.describe(b)
	if err := res.writeTables(b, c); err != nil {
		return err
	}
	b.WriteString("\n")
	for _, n := range res.notes(c) {
		b.WriteString(n + "\n")
	}
	if interrupted {
		fmt.Fprintf(b, "INTERRUPTED: %d of %s finished; the figures cover those.\n", len(res.Runs), plural(c.runs(), "run"))
	}
	return nil
}

// writeVerdict writes v's summary under a heading.
func writeVerdict(b *strings.Builder, v Verdict) {
	if len(v.Summary) == 0 {
		return
	}
	b.WriteString("\nverdict:\n")
	for _, s := range v.Summary {
		b.WriteString("  " + s + "\n")
	}
}
