package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChurnTiny runs the churn command at a tiny scale, one child process
// per run: every implementation at both goroutine counts, no probe early,
// no cancel of a pending timer failed, and the report, the envelope and
// the verdict say what was measured.
func TestChurnTiny(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"churn", "-json", "-out", dir, "-shards", "2"}, tinyChurn("")...)
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())

	env := decodeEnvelope[ChurnConfig, ChurnResults](t, stdout.Bytes())
	assert.Equal(t, "churn", env.Command)
	assert.Equal(t, []int{1, 2}, env.Config.Goroutines)
	assert.Equal(t, 2000, env.Config.Resident)
	assert.Equal(t, 64, env.Config.Ring)
	res := env.Results
	require.Len(t, res.Runs, 6, "3 implementations at 2 goroutine counts, 1 round")
	var order []string
	for _, r := range res.Runs {
		order = append(order, r.Impl)
		assert.Equal(t, 1, r.Round)
		assert.Equal(t, 2000, r.Resident)
		assert.Positive(t, r.Pairs, "%s: the rings filled during warm-up", r.Impl)
		assert.GreaterOrEqual(t, r.Schedules, r.Pairs)
		assert.Positive(t, r.CPUPerPair, r.Impl)
		assert.Positive(t, r.HeapObjects, r.Impl)
		assert.Positive(t, r.HeapSamples, r.Impl)
		assert.Positive(t, r.HeapLive, r.Impl)
		assert.Zero(t, r.ProbesEarly, "%s: a probe ran early", r.Impl)
		assert.Zero(t, r.CancelMissed, "%s: a cancel of a pending 30s timer failed", r.Impl)
		assert.Equal(t, churnCall(r.Impl), r.Call)
		if r.Impl == churnStd {
			assert.Zero(t, r.Shards)
		} else {
			assert.Equal(t, 2, r.Shards)
		}
	}
	assert.Equal(t, []string{churnStd, churnWheel, churnKeyed, churnStd, churnWheel, churnKeyed}, order, "interleaved")
	require.Len(t, res.Summaries, 6)
	for _, s := range res.Summaries {
		assert.Equal(t, 1, s.Runs)
		f := s.Figures["cpu_per_pair"]
		assert.Equal(t, f.Min, f.Max, "one run: its own range")
		p := s.Figures["probe_p99"]
		assert.Equal(t, p.Min, p.Median, "one run: the pooled probes are its own")
		if s.Impl == churnStd {
			assert.Empty(t, s.Ratios)
		} else {
			assert.Contains(t, s.Ratios, "cpu_per_pair")
			assert.Contains(t, s.Ratios, "heap_objects")
		}
	}
	require.NotNil(t, env.Verdict)
	assert.Contains(t, env.Verdict.Ratios, "g1/wheel/cpu_per_pair")
	assert.Contains(t, env.Verdict.Winners, "g2/cpu_per_pair")
	assert.Contains(t, env.Verdict.Winners, "g1/pairs_per_sec", "every rated row has its winner")
	assert.Contains(t, env.Verdict.Winners, "g1/heap_live")
	assert.Contains(t, env.Verdict.Summary, "churn: no probe ran early, no cancel of a pending timer failed.")

	text, err := os.ReadFile(filepath.Join(dir, "churn.txt"))
	require.NoError(t, err)
	out := string(text)
	assert.Regexp(t, `(?m)^\s+time\.AfterFunc\s+s\.AfterFunc\s+s\.AfterFunc\(ByKey\)\s+winner$`, out)
	assert.Contains(t, out, "1 goroutine on GOMAXPROCS ")
	assert.Contains(t, out, "2 goroutines on GOMAXPROCS ")
	assert.Contains(t, out, ": one run; ratio to time.AfterFunc after each figure")
	assert.Contains(t, out, "one fresh process per run, 1 round of the three in turn")
	assert.Regexp(t, `(?m)^  CPU per schedule\+cancel pair\s+\S+\s+\S+ [\d.]+x\s+\S+ [\d.]+x\s+\S.*$`, out)
	assert.NotRegexp(t, `\(\S+-\S+\)`, out, "one run: no range")
	// 400ms windows hold far fewer than 1000 probes.
	assert.Regexp(t, `(?m)^  probe lateness p99\s.*noise: \d+ probes in all$`, out)
	assert.Contains(t, out, "\nverdict:\n  churn, 1 goroutine, against time.AfterFunc: s.AfterFunc: CPU ")
	assert.Contains(t, out, "  heap object bytes, mean in window ")
	assert.Regexp(t, `s\.AfterFunc: CPU \S+, heap object bytes \S+, `, out)

	assert.Contains(t, stderr.String(), "churn: 6 phases, about ")
	assert.Contains(t, stderr.String(), "phase 6 of 6 (about ")
	assert.Contains(t, stderr.String(), "churn, 2 goroutines, round 1 of 1: s.AfterFunc(ByKey)")
}

// TestCompareChurnSection: compare ends with the churn section, and its
// verdict with the churn's lines.
func TestCompareChurnSection(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := tinyArgs("compare", append([]string{"-json", "-duration", "300ms"}, tinyChurn("churn-")...)...)
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())
	env := decodeEnvelope[compareConfig, compareResults](t, stdout.Bytes())
	require.NotNil(t, env.Config.Churn)
	assert.Equal(t, 1, env.Config.Churn.Rounds)
	require.NotNil(t, env.Results.Churn)
	assert.Len(t, env.Results.Churn.Runs, 6)
	require.NotNil(t, env.Verdict)
	assert.Contains(t, strings.Join(env.Verdict.Summary, "\n"), "churn, 2 goroutines, against time.AfterFunc: s.AfterFunc: CPU ")
	assert.Contains(t, env.Verdict.Ratios, "churn/g2/keyed/cpu_per_pair")
	assert.Contains(t, env.Verdict.Winners, "churn/g2/cpu_per_pair")
	assert.Contains(t, env.Verdict.Winners, "churn/g1/probe_p99")
	assert.Contains(t, stderr.String(), "compare: 9 phases, about ")
	assert.Contains(t, stderr.String(), "phase 9 of 9 (about ")

	stdout.Reset()
	require.Equal(t, exitOK, run(tinyArgs("compare", append([]string{"-duration", "300ms"}, tinyChurn("churn-")...)...), &stdout, &stderr))
	out := stdout.String()
	assert.Contains(t, out, "== a proxy-shaped load\n")
	assert.Contains(t, out, "\n== delayed-cancel churn (go run ./bench churn runs it alone)\n")
	assert.Less(t, strings.Index(out, "== delayed-cancel churn"), strings.Index(out, "\nverdict:\n"))
}

// TestChurnInterrupted: an interrupt during a child's run stops it, and
// the command reports what finished, and exits 130 like every command.
func TestChurnInterrupted(t *testing.T) {
	stdout, _ := interruptAt(t, []string{"churn", "-json", "-goroutines", "1", "-rounds", "1", "-resident", "1000", "-warmup", "30s"}, "phase 1 of 3")
	env := decodeEnvelope[ChurnConfig, ChurnResults](t, stdout)
	assert.True(t, env.Interrupted)
	assert.Empty(t, env.Results.Runs)
}

func TestChurnBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"churn", "-goroutines", "0"}, "invalid value 0 for -goroutines: must be in [1, 64]"},
		{[]string{"churn", "-goroutines", "2,x"}, `invalid value "2,x" for flag -goroutines`},
		{[]string{"churn", "-rounds", "0"}, "invalid value 0 for -rounds: must be >= 1"},
		{[]string{"churn", "-warmup", "10ms"}, "invalid value 10ms for -warmup: must be at least 100ms"},
		{[]string{"churn", "-resident", "-1"}, "invalid value -1 for -resident"},
		{[]string{"churn", "-cancel-after", "1000"}, "invalid value 1000 for -cancel-after: must be a power of two in [1, 16777216]"},
		{[]string{"compare", "-churn-cancel-after", "0"}, "invalid value 0 for -churn-cancel-after: must be a power of two"},
		{[]string{"churn", "-duration", "3"}, `invalid value "3" for -duration: missing unit; use e.g. 3s or 3ms`},
		{[]string{"churn", "-wait-quiet", "-1s"}, "invalid value -1s for -wait-quiet: must not be negative"},
		{[]string{"churn", "-rate", "5"}, "flag provided but not defined: -rate"},
		{[]string{"compare", "-churn-rounds", "-1"}, "invalid value -1 for -churn-rounds: must be >= 0 (0: no churn section)"},
		{[]string{"compare", "-churn-goroutines", "65"}, "invalid value 65 for -churn-goroutines: must be in [1, 64]"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseArgs(tt.args)
			var ue usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	o, err := parseArgs([]string{"churn", "-goroutines", "6,2", "-rounds", "5", "-gomaxprocs", "3", "-wait-quiet", "1m"})
	require.NoError(t, err)
	assert.Equal(t, time.Minute, o.churn.WaitQuiet)
	assert.Zero(t, waitQuiet(context.Background(), 0, nil), "no limit, no wait")
	assert.Equal(t, []int{6, 2}, o.churn.Goroutines, "in the order given")
	assert.Equal(t, 5, o.churn.Rounds)
	assert.Equal(t, 3, o.churn.GOMAXPROCS)
	assert.Equal(t, 3, o.churn.Shards, "shards follow -gomaxprocs")
	o, err = parseArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, defaultChurnConfig().Goroutines, o.churn.Goroutines, "compare runs the churn section by default")
	assert.Equal(t, 3, o.churn.Rounds)
}

func TestChurnChildArgs(t *testing.T) {
	c := churnChild{impl: churnKeyed, goroutines: 6, resident: 10, ring: 64, warmup: time.Second, duration: 2 * time.Second,
		shards: 3, tick: time.Millisecond, affinity: true, procs: 2}
	assert.Equal(t, []string{churnRunCmd, "-impl", "keyed", "-goroutines", "6", "-resident", "10", "-cancel-after", "64", "-warmup", "1s",
		"-duration", "2s", "-shards", "3", "-tick", "1ms", "-affinity=true", "-gomaxprocs", "2"}, c.args())
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, runChurnChild(context.Background(), []string{"-impl", "nosuch"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `bad -impl "nosuch"`)
	assert.True(t, validRing(1))
	assert.True(t, validRing(1<<16))
	assert.False(t, validRing(0))
	assert.False(t, validRing(1000))
	assert.False(t, validRing(churnMaxRing*2))
}

// TestChurnSummaryPoolsProbes: a summary's probe percentiles are of all
// its runs' probes together, its ranges the runs' own; its other figures
// are medians.
func TestChurnSummaryPoolsProbes(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	run := func(impl string, cpu float64, probes []time.Duration) ChurnRun {
		return ChurnRun{Impl: impl, Goroutines: 2, CPUPerPair: cpu, Measured: time.Second,
			Probes: exactPercentiles(slices.Clone(probes)), probes: probes}
	}
	res := &ChurnResults{Runs: []ChurnRun{
		run(churnStd, 300, ms(1, 2, 3)), run(churnWheel, 100, ms(10, 11)),
		run(churnStd, 500, ms(4, 5, 6, 7)), run(churnWheel, 90, ms(20)),
		run(churnStd, 400, ms(8)),
	}}
	c := defaultChurnConfig()
	c.Goroutines = []int{2}
	res.summarize(c)
	std := res.summary(2, churnStd)
	require.NotNil(t, std)
	assert.Equal(t, 3, std.Runs)
	assert.Equal(t, 8, std.Probes)
	assert.Equal(t, spread{Median: 400, Min: 300, Max: 500}, std.Figures["cpu_per_pair"])
	// Pooled 1..8ms: p50 is the 5th smallest; each run's own p50 is 2ms,
	// 6ms and 8ms.
	assert.Equal(t, spread{Median: float64(5 * time.Millisecond), Min: float64(2 * time.Millisecond), Max: float64(8 * time.Millisecond)},
		std.Figures["probe_p50"])
	assert.Equal(t, float64(8*time.Millisecond), std.Figures["probe_max"].Median)
	wheel := res.summary(2, churnWheel)
	require.NotNil(t, wheel)
	assert.InDelta(t, 95.0/400, wheel.Ratios["cpu_per_pair"], 1e-9, "medians' ratio")
	assert.Equal(t, "3 probes in all", probeNoise(wheel))
	assert.Nil(t, res.summary(6, churnStd), "not run")
}

// churnSummaries returns results of one run per implementation at g
// goroutines, with CPU per pair cpu[i] for churnImpls[i] and enough
// probes and GC cycles to rate every row.
func churnSummaries(g int, cpu ...float64) *ChurnResults {
	res := &ChurnResults{}
	for i, impl := range churnImpls {
		probes := make([]time.Duration, minSamples)
		for j := range probes {
			probes[j] = time.Duration(j+1) * time.Microsecond
		}
		res.Runs = append(res.Runs, ChurnRun{Impl: impl, Goroutines: g, CPUPerPair: cpu[i], PairsPerSec: 1e6 / cpu[i], AllocsPerPair: 1,
			HeapObjects: 1 << 20, HeapLive: 1 << 20, GC: gcCost{Cycles: minGCCycles, CPU: time.Millisecond},
			Measured: time.Second, Probes: exactPercentiles(slices.Clone(probes)), probes: probes})
	}
	return res
}

// TestChurnVerdictWinners: the verdict carries the winner of every row
// the table shows one for, keyed g<G>/<metric> and valued by
// implementation, beside ratios keyed g<G>/<impl>/<metric>; compare
// prefixes both with churn/.
func TestChurnVerdictWinners(t *testing.T) {
	c := defaultChurnConfig()
	c.Goroutines = []int{2}
	res := churnSummaries(2, 700, 240, 250)
	res.summarize(c)
	v := res.verdict(c)
	var rated []string
	for _, m := range churnMetrics() {
		key := "g2/" + m.key
		if m.better == "" {
			assert.NotContains(t, v.Winners, key, "a row that rates nothing has no winner")
			continue
		}
		rated = append(rated, key)
		assert.Contains(t, v.Winners, key)
	}
	assert.Len(t, v.Winners, len(rated))
	assert.Equal(t, "wheel = keyed", v.Winners["g2/cpu_per_pair"], "within 5% of each other, both ahead of afterfunc")
	assert.Equal(t, "wheel = keyed", v.Winners["g2/pairs_per_sec"])
	assert.Equal(t, winTie, v.Winners["g2/allocs_per_pair"])
	assert.Contains(t, v.Ratios, "g2/wheel/cpu_per_pair")
	assert.Contains(t, v.Ratios, "g2/keyed/heap_objects")
	for k, w := range v.Winners {
		assert.NotContains(t, w, "s.", "%s: winners name implementations, not calls", k)
	}
	assert.Contains(t, v.Summary[0], "s.AfterFunc: CPU 0.34x, heap object bytes 1.00x, GC cycles 1.00x")

	// The table shows the same winners, by call.
	var b strings.Builder
	require.NoError(t, res.writeTables(&b, c))
	assert.Regexp(t, `(?m)^  CPU per schedule\+cancel pair\s.*\ss\.AfterFunc = s\.AfterFunc\(ByKey\)$`, b.String())
	assert.Regexp(t, `(?m)^  heap object bytes, mean in window\s.*\stie$`, b.String())

	cmp := &Comparison{ChurnConfig: c, Churn: res}
	cv := cmp.verdict()
	require.GreaterOrEqual(t, len(cv.Summary), 2)
	assert.Equal(t, "conclusion: on the churn, shardwheel's figures against time.AfterFunc's: its CPU lower (0.34x-0.36x); "+
		"its heap about the same (1.00x).", cv.Summary[len(cv.Summary)-2])
	assert.True(t, strings.HasPrefix(cv.Summary[len(cv.Summary)-1], "next: "))
	assert.Equal(t, "wheel = keyed", cv.Winners["churn/g2/cpu_per_pair"])
	assert.Contains(t, cv.Ratios, "churn/g2/keyed/cpu_per_pair")
	assert.Len(t, cv.Winners, len(rated))
}

// TestChurnBusyOfHostCPUs: a run is busy by the same threshold as every
// other report's, of the host's CPUs, whatever the run's GOMAXPROCS.
func TestChurnBusyOfHostCPUs(t *testing.T) {
	c := defaultChurnConfig()
	c.Goroutines = []int{2}
	res := churnSummaries(2, 700, 240, 250)
	for i := range res.Runs {
		res.Runs[i].GOMAXPROCS = 1000 // a tenth of it would be 100 cores
	}
	res.Runs[1].OtherCPU = time.Duration(busyCores(runtime.NumCPU()) * float64(time.Second))
	res.summarize(c)
	assert.Zero(t, res.summary(2, churnStd).Busy)
	assert.Equal(t, 1, res.summary(2, churnWheel).Busy)
}

// TestChurnInterruptedWording: the count of runs finished reads as a
// count of the planned runs.
func TestChurnInterruptedWording(t *testing.T) {
	c := defaultChurnConfig()
	var b strings.Builder
	require.NoError(t, writeChurnSection(&b, c, &ChurnResults{}, true))
	assert.Contains(t, b.String(), "INTERRUPTED: 0 of 18 runs finished; the figures cover those.\n")
}

// TestChurnBusyRunsAreOneWarning: however many implementations and
// goroutine counts had busy runs, the notes warn once, counting them all.
func TestChurnBusyRunsAreOneWarning(t *testing.T) {
	res := &ChurnResults{Summaries: []ChurnSummary{
		{Impl: churnStd, Goroutines: 2, Runs: 3, Busy: 2},
		{Impl: churnWheel, Goroutines: 2, Runs: 3},
		{Impl: churnKeyed, Goroutines: 6, Runs: 3, Busy: 1},
	}}
	notes := strings.Join(res.notes(ChurnConfig{}), "\n")
	assert.Equal(t, 1, strings.Count(notes, "other processes kept the host busy"), notes)
	assert.Contains(t, notes, "WARNING: other processes kept the host busy during 3 of 9 runs (time.AfterFunc, 2 goroutines: 2 of 3; "+
		"s.AfterFunc(ByKey), 6 goroutines: 1 of 3): such a run gets less")
}
