package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinySpike returns flags of a spike small enough for tests, even under
// the race detector: a churn whose cancel ring fills in a few
// milliseconds, and a short wait.
func tinySpike(extra ...string) []string {
	return append([]string{"spike", "-timers", "20000", "-producers", "2", "-churn-rate", "20000", "-churn-goroutines", "1",
		"-cancel-after", "1024", "-warmup", "200ms", "-wait", "2s", "-shards", "2"}, extra...)
}

// TestSpikeTiny runs the spike command at a tiny scale, one child process
// per run: every implementation, before, peak, samples and a second
// spike, and the report, the envelope and the verdict say what was
// measured.
func TestSpikeTiny(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(tinySpike("-json", "-out", dir), &stdout, &stderr), stderr.String())

	env := decodeEnvelope[SpikeConfig, SpikeResults](t, stdout.Bytes())
	assert.Equal(t, "spike", env.Command)
	assert.Equal(t, []int{20000}, env.Config.Timers)
	assert.True(t, env.Config.Churn)
	assert.Equal(t, defaultSpikeTargets, env.Config.Targets)
	res := env.Results
	require.Len(t, res.Runs, 3, "3 implementations, 1 run")
	behind := map[string]int{} // runs whose churn fell below 98% of its rate, by implementation
	var order []string
	for _, r := range res.Runs {
		order = append(order, r.Impl)
		assert.Equal(t, 1, r.Round)
		assert.Equal(t, 20000, r.Timers)
		assert.Equal(t, spikeCall(r.Impl), r.Call)
		assert.Greater(t, r.Peak.Heap, r.Before.Heap, "%s: the spike grew the heap", r.Impl)
		assert.Positive(t, r.Before.GC, r.Impl)
		assert.Positive(t, r.Handles, r.Impl)
		require.NotEmpty(t, r.Samples, r.Impl)
		assert.Equal(t, r.Samples[len(r.Samples)-1], r.After, "%s: after is the last sample", r.Impl)
		if r.CameBack {
			assert.Equal(t, r.After.At, r.ComeBack, r.Impl)
			assert.True(t, defaultSpikeTargets.cameBack(r.Before, r.Peak, r.After), r.Impl)
		} else {
			assert.GreaterOrEqual(t, r.After.At, 2*time.Second, "%s: sampled until the wait was over", r.Impl)
		}
		for i, s := range r.Samples[:len(r.Samples)-1] {
			assert.False(t, defaultSpikeTargets.cameBack(r.Before, r.Peak, s), "%s: sample %d came back, and sampling went on", r.Impl, i)
		}
		assert.Greater(t, r.Second.Heap, r.Before.Heap, "%s: a second spike", r.Impl)
		// The churn ran, paced: never ahead of its rate. How close it came
		// to the rate is the host's speed (a race build beside other work
		// reached a third of it), not the run's shape: a run that fell
		// behind says so (below).
		assert.Positive(t, r.ChurnRate, r.Impl)
		assert.LessOrEqual(t, r.ChurnRate, 20000.0, "%s: the churn ran ahead of its rate", r.Impl)
		if r.ChurnRate < 0.98*20000 {
			behind[r.Impl]++
		}
		assert.Zero(t, r.ChurnMissed, r.Impl)
		if r.Impl == spikeStd {
			assert.Nil(t, r.Before.Nodes)
			assert.Zero(t, r.Shards)
			continue
		}
		require.NotNil(t, r.Peak.Nodes, r.Impl)
		assert.GreaterOrEqual(t, r.Peak.Nodes.Allocated, uint64(20000), "%s: the arena holds the spike", r.Impl)
		assert.GreaterOrEqual(t, r.Peak.Nodes.Resident, 20000, "%s: measured once the shards filed the spike", r.Impl)
		assert.GreaterOrEqual(t, r.Second.Nodes.Resident, 20000, r.Impl)
		require.NotNil(t, r.After.Nodes, "%s: Stats read once the sampling was over", r.Impl)
		for _, smp := range r.Samples[:len(r.Samples)-1] {
			assert.Nil(t, smp.Nodes, "%s: no Stats read during the samples by default", r.Impl)
		}
		assert.Greater(t, r.Peak.Nodes.Allocated, r.Before.Nodes.Allocated, r.Impl)
		assert.Equal(t, 2, r.Shards)
	}
	assert.Equal(t, spikeImpls, order, "in the order of -impls")
	require.Len(t, res.Summaries, 3)
	for _, s := range res.Summaries {
		assert.Equal(t, 1, s.Runs)
		assert.Equal(t, behind[s.Impl], s.Behind, "%s: runs whose churn fell behind", s.Impl)
		f := s.Figures["kept"]
		assert.Equal(t, f.Min, f.Max, "one run: its own range")
		assert.Contains(t, s.Figures, "gc_ratio")
		assert.Equal(t, s.Impl != spikeStd, s.Figures["nodes_peak"].Median > 0, s.Impl)
	}
	require.NotNil(t, env.Verdict)
	assert.Contains(t, env.Verdict.Ratios, "20000/closure/kept")
	assert.Contains(t, env.Verdict.Ratios, "20000/afterfunc/gc_ratio")
	assert.Contains(t, env.Verdict.Winners, "20000/kept")
	assert.NotContains(t, env.Verdict.Winners, "20000/heap_before", "a row that rates nothing has no winner")
	require.Len(t, env.Verdict.Summary, 1)
	assert.Contains(t, env.Verdict.Summary[0], "spike of 20,000 timers, with churn: s.AfterFunc kept ")

	text, err := os.ReadFile(filepath.Join(dir, "spike.txt"))
	require.NoError(t, err)
	out := string(text)
	assert.Regexp(t, `(?m)^\s+s\.AfterFunc\s+h\.AfterFunc\s+time\.AfterFunc\s+winner$`, out)
	for _, want := range []string{"a spike comes back, with churn", "20,000 timers, with churn: one run", "heap at peak", "forced GC after / before",
		"came back after", "nodes allocated at peak", "blocks re-made by the second spike", "target: came back within 20s",
		"churn throughout: 20k timers/s from 1 goroutine", "for up to 2s", "\nverdict:\n  spike of 20,000 timers",
		"Stats read before the spike, at the peaks (once the shards had filed the spike) and after the sampling only"} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `(?m)^  nodes allocated at peak\s+\S+\s+\S+\s+-$`, out, "time.AfterFunc has no nodes")
	for _, impl := range spikeImpls {
		note := spikeCall(impl) + ", 20,000 timers: the churn fell below 98% of 20k timers/s in "
		assert.Equal(t, behind[impl] > 0, strings.Contains(out, note), "%s: a churn that fell behind is reported, and only then", impl)
		if behind[impl] > 0 {
			assert.Contains(t, out, note+"1 of 1 run")
		}
	}
	assert.Contains(t, stderr.String(), "spike: 3 phases, about ")
	assert.Contains(t, stderr.String(), "phase 3 of 3 (about ")
	assert.Contains(t, stderr.String(), "  heap ", "each run's figures as it ends")
}

// TestSpikeIdle: without churn the runs are idle but for the spike, and
// say so; -stats-every reads Stats during the samples, and says so.
func TestSpikeIdle(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"spike", "-churn=false", "-impls", "handler", "-timers", "5000", "-wait", "2s", "-shards", "1",
		"-stats-every", "1s", "-json"}
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())
	env := decodeEnvelope[SpikeConfig, SpikeResults](t, stdout.Bytes())
	assert.Equal(t, time.Second, env.Config.StatsEvery)
	require.Len(t, env.Results.Runs, 1)
	r := env.Results.Runs[0]
	assert.False(t, r.Churn)
	assert.Zero(t, r.ChurnRate)
	for _, smp := range r.Samples {
		assert.NotNil(t, smp.Nodes, "a Stats read at every sample a second apart")
	}

	stdout.Reset()
	require.Equal(t, exitOK, run(args[:len(args)-1], &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "a spike comes back, idle (no churn), Stats read every 1s")
	assert.Contains(t, out, "idle: no churn")
	assert.Contains(t, out, "Stats read during the samples, at least 1s apart")
	assert.Contains(t, out, "5,000 timers, idle (no churn), Stats read every 1s: one run")
	assert.Regexp(t, `(?m)^\s+h\.AfterFunc\s+winner$`, out, "one column")
	assert.NotContains(t, out, "time.AfterFunc  ")
}

func TestSpikeFlags(t *testing.T) {
	o, err := parseArgs([]string{"spike"})
	require.NoError(t, err)
	assert.Equal(t, []int{1_000_000, 10_000_000}, o.spike.Timers)
	assert.Equal(t, []string{spikeClosure, spikeHandler, spikeStd}, o.spike.Impls)
	assert.True(t, o.spike.Churn, "churn on by default")
	assert.Equal(t, 200_000.0, o.spike.ChurnRate)
	assert.Equal(t, 65536, o.spike.Ring)
	assert.Equal(t, 1, o.spike.Runs)
	assert.Equal(t, 30*time.Second, o.spike.Wait)
	assert.Equal(t, 20*time.Second, o.spike.Targets.Within)
	assert.Zero(t, o.spike.StatsEvery, "no Stats read during the samples by default")
	assert.Equal(t, o.shards, o.spike.Shards)

	o, err = parseArgs([]string{"spike", "-timers", "2000,1000", "-impls", "afterfunc,handler", "-churn=false", "-runs", "3",
		"-wait", "5s", "-gomaxprocs", "3", "-churn-rate", "1000", "-tick", "2ms"})
	require.NoError(t, err)
	assert.Equal(t, []int{2000, 1000}, o.spike.Timers, "in the order given")
	assert.Equal(t, []string{spikeStd, spikeHandler}, o.spike.Impls)
	assert.False(t, o.spike.Churn)
	assert.Equal(t, 3, o.spike.Runs)
	assert.Equal(t, 5*time.Second, o.spike.Wait)
	assert.Equal(t, 3, o.spike.GOMAXPROCS)
	assert.Equal(t, 3, o.spike.Shards, "shards follow -gomaxprocs")
	assert.Equal(t, 2*time.Millisecond, o.spike.Tick)
	assert.Equal(t, 12, o.spike.runs(), "3 runs of 2 implementations at 2 sizes")

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"spike", "-timers", "0"}, "invalid value 0 for -timers: must be in [1, 1e8]"},
		{[]string{"spike", "-timers", "1e6"}, `invalid value "1e6" for flag -timers`},
		{[]string{"spike", "-impls", "closure,wheel"}, `invalid value "wheel" for -impls: must be one of closure,handler,afterfunc`},
		{[]string{"spike", "-runs", "0"}, "invalid value 0 for -runs: must be >= 1"},
		{[]string{"spike", "-producers", "0"}, "invalid value 0 for -producers"},
		{[]string{"spike", "-wait", "-1s"}, "invalid value -1s for -wait: must not be negative"},
		{[]string{"spike", "-churn-rate", "0"}, "invalid value 0 for -churn-rate"},
		{[]string{"spike", "-churn-goroutines", "65"}, "invalid value 65 for -churn-goroutines: must be in [1, 64]"},
		{[]string{"spike", "-cancel-after", "1000"}, "invalid value 1000 for -cancel-after: must be a power of two"},
		{[]string{"spike", "-churn-rate", "1000"}, "invalid value 65536 for -cancel-after: keeps a churn timer 2m11.072s"},
		{[]string{"spike", "-warmup", "-1s"}, "invalid value -1s for -warmup"},
		{[]string{"spike", "-stats-every", "-1s"}, "invalid value -1s for -stats-every: must not be negative"},
		{[]string{"spike", "-shards", "0"}, "invalid value 0 for -shards"},
		{[]string{"spike", "-tick", "10us"}, "invalid value 10µs for -tick"},
		{[]string{"spike", "-rate", "5"}, "flag provided but not defined: -rate"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseArgs(tt.args)
			var ue usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = parseArgs([]string{"spike", "-churn=false", "-churn-rate", "1000"})
	assert.NoError(t, err, "without churn its timers' life does not matter")
}

// TestSpikeCameBack is the come-back criterion: the heap within 10% of
// the spike's growth above before, and a forced GC at most 2x before
// plus 2ms, both at once.
func TestSpikeCameBack(t *testing.T) {
	ms := time.Millisecond
	before := spikeSample{Heap: 100 << 20, GC: 5 * ms}
	peak := spikeSample{Heap: 1100 << 20, GC: 300 * ms} // grew 1000 MiB
	tg := defaultSpikeTargets
	for _, tt := range []struct {
		name       string
		s          spikeSample
		heap, gc   bool
		keptShare  float64
		cameBackOK bool
	}{
		{"at the peak", peak, false, false, 1, false},
		{"exactly 10% kept, GC exactly 2x+2ms", spikeSample{Heap: 200 << 20, GC: 12 * ms}, true, true, 0.1, true},
		{"just over 10% kept", spikeSample{Heap: 200<<20 + 1, GC: 5 * ms}, false, true, 0.1, false},
		{"heap back, GC over 2x+2ms", spikeSample{Heap: 150 << 20, GC: 12*ms + 1}, true, false, 0.05, false},
		{"below before", spikeSample{Heap: 90 << 20, GC: ms}, true, true, -0.01, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.heap, tg.heapBack(before, peak, tt.s))
			assert.Equal(t, tt.gc, tg.gcBack(before, tt.s))
			assert.Equal(t, tt.cameBackOK, tg.cameBack(before, peak, tt.s))
			assert.InDelta(t, tt.keptShare, kept(before, peak, tt.s), 1e-6)
		})
	}
	// A spike that grew nothing has nothing to give back.
	assert.True(t, tg.heapBack(before, before, before))
	assert.Zero(t, kept(before, before, spikeSample{Heap: 200 << 20}))
}

// TestSpikeSummary: a summary's come-back covers the runs that came
// back, and says how many did not; the target counts those within it.
func TestSpikeSummary(t *testing.T) {
	c := defaultSpikeConfig()
	c.Timers, c.Impls, c.Runs = []int{1000}, []string{spikeClosure, spikeStd}, 3
	run := func(impl string, back time.Duration, keptMiB int64) SpikeRun {
		r := SpikeRun{Impl: impl, Call: spikeCall(impl), Timers: 1000, Churn: true, ChurnRate: c.ChurnRate,
			Before: spikeSample{Heap: 10 << 20, GC: 4 * time.Millisecond}, Peak: spikeSample{Heap: 110 << 20, GC: 40 * time.Millisecond}}
		r.After = spikeSample{At: back, Heap: (10 + keptMiB) << 20, GC: 6 * time.Millisecond}
		r.CameBack, r.ComeBack = back < c.Wait, back
		if !r.CameBack {
			r.ComeBack = 0
		}
		r.Second = r.Peak
		return r
	}
	res := &SpikeResults{Runs: []SpikeRun{
		run(spikeClosure, 3*time.Second, 5), run(spikeStd, 31*time.Second, 12),
		run(spikeClosure, 25*time.Second, 8), run(spikeStd, 31*time.Second, 14),
		run(spikeClosure, 31*time.Second, 11), run(spikeStd, 31*time.Second, 13),
	}}
	res.summarize(c)
	require.Len(t, res.Summaries, 2)
	sw, af := res.summary(1000, spikeClosure), res.summary(1000, spikeStd)
	assert.Equal(t, 2, sw.CameBack)
	assert.Equal(t, 1, sw.Met, "25s is past the 20s target")
	assert.Equal(t, spread{14e9, 3e9, 25e9}, sw.Figures["come_back"], "the runs that came back")
	assert.Equal(t, "14s (3s-25s) in 2 of 3 runs", sw.comeBackCell(c.Wait))
	assert.Equal(t, "met in 1 of 3 runs", sw.targetCell())
	assert.Equal(t, spread{0.08, 0.05, 0.11}, sw.Figures["kept"])
	assert.Equal(t, 1.5, sw.Figures["gc_ratio"].Median)
	assert.Zero(t, af.CameBack)
	assert.NotContains(t, af.Figures, "come_back")
	assert.Equal(t, "not within 30s", af.comeBackCell(c.Wait))
	assert.Equal(t, "missed", af.targetCell())
	assert.Equal(t, "met", (&SpikeSummary{Runs: 1, Met: 1}).targetCell())
	assert.Equal(t, "met in all 3 runs", (&SpikeSummary{Runs: 3, Met: 3}).targetCell())

	v := res.verdict(c)
	assert.Equal(t, spikeClosure, v.Winners["1000/kept"])
	assert.InDelta(t, 0.08, v.Ratios["1000/closure/kept"], 1e-9)
	require.Len(t, v.Summary, 1)
	assert.Contains(t, v.Summary[0], "s.AfterFunc kept 8% of its heap growth, forced GC 1.5x its time before, back after 14s in 2 of 3 runs (target met in 1 of 3 runs)")
	assert.Contains(t, v.Summary[0], "time.AfterFunc kept 13% of its heap growth, forced GC 1.5x its time before, not back within 30s (target missed)")
}

func TestSpikeChildArgs(t *testing.T) {
	c := spikeChild{impl: spikeHandler, timers: 10, producers: 3, churn: true, rate: 1000, churnG: 2, ring: 64, warmup: time.Second,
		wait: 5 * time.Second, statsEvery: 2 * time.Second, shards: 3, tick: time.Millisecond, affinity: true, procs: 2}
	assert.Equal(t, []string{spikeRunCmd, "-impl", "handler", "-timers", "10", "-producers", "3", "-churn=true", "-churn-rate", "1000",
		"-churn-goroutines", "2", "-cancel-after", "64", "-warmup", "1s", "-wait", "5s", "-stats-every", "2s", "-shards", "3", "-tick", "1ms",
		"-affinity=true", "-gomaxprocs", "2"}, c.args())
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, runSpikeChild(context.Background(), []string{"-impl", "wheel"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `bad -impl "wheel"`)
	assert.Equal(t, "1h", shortDuration(time.Hour))
	assert.Equal(t, "30m", shortDuration(30*time.Minute))
	assert.Equal(t, "1m30s", shortDuration(90*time.Second))
	assert.Equal(t, "2s", shortDuration(2*time.Second))
}

// TestSpikeInterrupted: an interrupt during a child's run stops it, and
// the command reports what finished, and exits 130 like every command.
func TestSpikeInterrupted(t *testing.T) {
	stdout, _ := interruptAt(t, []string{"spike", "-json", "-timers", "1000", "-warmup", "30s"}, "phase 1 of 3")
	env := decodeEnvelope[SpikeConfig, SpikeResults](t, stdout)
	assert.True(t, env.Interrupted)
	assert.Empty(t, env.Results.Runs)
}
