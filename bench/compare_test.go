package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompareText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(tinyArgs("compare"), &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Regexp(t, `(?m)^\s+shardwheel\s+time\.AfterFunc\s+ratio\s+winner$`, out)
	assert.Contains(t, out, "calls: shardwheel s.AfterFunc (no key), Timer.Cancel, Timer.Reset; time.AfterFunc, Timer.Stop, Timer.Reset\n")
	assert.Contains(t, out, "2 load goroutines")
	assert.Contains(t, out, "shardwheel: 2 shards, tick 1ms")
	for _, row := range []string{"requests/s achieved", "calls/s", "CPU per call", "library CPU (cores)", "library CPU per call", "heap per resident timer",
		"GC CPU time", "GC pauses", "tick lag p50/p99/p99.9/max", "lateness p50", "lateness p99.9", "lateness max", "Stats lateness p50/p99/p99.9/max"} {
		assert.Contains(t, out, "  "+row, row)
	}
	// A rated row has both values, a ratio and a winner.
	assert.Regexp(t, `(?m)^  CPU per call\s+\S+\s+\S+\s+[\d.]+x\s+(shardwheel|time\.AfterFunc|tie)$`, out)
	assert.Regexp(t, `(?m)^  GC cycles\s+\d+\s+\d+\s+(\S+x|n/a)\s+(shardwheel|time\.AfterFunc|tie|noise: \d+ GC cycles?)$`, out)
	assert.Regexp(t, `(?m)^  tick lag p50/p99/p99.9/max\s+\S+/\S+/\S+/\S+\s+n/a$`, out, "AfterFunc has no tick: no ratio, no winner")
	assert.NotContains(t, out, "0.00x")
	// (A host too busy for even the tiny load makes it not comparable.)
	assert.Regexp(t, `\nverdict:\n  proxy-shaped load(, shardwheel \(s\.AfterFunc\) against time\.AfterFunc|: NOT COMPARABLE): `, out)
	assert.Regexp(t, `(?m)^  conclusion: .+\n  next: .+\n$`, out, "the verdict ends with one conclusion and the next step")
	assert.NotContains(t, out, "delayed-cancel churn", "-churn-rounds 0 leaves the section out")
	// The load alone's own figures, to check the subtraction against.
	assert.Regexp(t, `(?m)^load alone \(no timer work\): CPU \S+ \(\S+ cores busy\), \S+ calls/s, \S+ per call$`, out)
	assert.NotContains(t, out, "INTERRUPTED")
	// Progress went to stderr: the plan, each phase, one final line per run.
	assert.Contains(t, stderr.String(), "compare: 3 phases, about ")
	assert.Contains(t, stderr.String(), "phase 1 of 3 (about ")
	assert.Contains(t, stderr.String(), "proxy-shaped load: shardwheel (s.AfterFunc)")
	assert.Regexp(t, `(?m)^shardwheel\s+measured `, stderr.String())
	assert.Regexp(t, `(?m)^load alone\s+measured `, stderr.String())
	assert.Regexp(t, `(?m)^time\.AfterFunc\s+measured `, stderr.String())
}

func TestCompareJSONAndOut(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(tinyArgs("compare", "-json", "-out", dir), &stdout, &stderr), stderr.String())

	env := decodeEnvelope[compareConfig, compareResults](t, stdout.Bytes())
	c := env.Results
	assert.Equal(t, "compare", env.Command)
	assert.False(t, env.Interrupted)
	assert.Equal(t, 2000.0, env.Config.Load.Rate)
	assert.Nil(t, env.Config.Churn, "-churn-rounds 0")
	assert.Nil(t, c.Churn)
	require.Len(t, c.Runs, 2)
	sw, af := c.Runs[0], c.Runs[1]
	assert.Equal(t, nameWheel, sw.Impl)
	assert.Equal(t, callWheel, sw.Call)
	assert.Equal(t, nameStdlib, af.Impl)
	assert.Equal(t, callStdlib, af.Call)
	// A window lasts the 1s asked, or longer where its end was late (up to
	// 1.7s with the race detector beside other work): never shorter, and
	// within the command's run.
	for _, r := range c.Runs {
		assert.GreaterOrEqual(t, r.Measured, time.Second, r.Impl)
		assert.Positive(t, r.Ops.Schedules)
		assert.Positive(t, r.Ops.Cancels)
		assert.Positive(t, r.Ops.Resets)
		assert.Positive(t, r.Lateness.Count, "timers fired in the window")
		assert.Positive(t, r.Resident)
		assert.Positive(t, r.BytesPerTimer)
	}
	require.NotNil(t, sw.TickLag)
	require.NotNil(t, sw.Wheel)
	assert.Nil(t, af.TickLag)

	// The load alone ran the same offered load and fired nothing; both
	// results subtract it.
	alone := c.LoadAlone
	require.NotNil(t, alone)
	assert.Equal(t, nameNull, alone.Impl)
	assert.GreaterOrEqual(t, alone.Measured, time.Second)
	assert.Less(t, sw.Measured+af.Measured+alone.Measured, env.Elapsed, "the windows lie within the run")
	// The same load was offered to both. How much of it each issued in
	// its window is the host's speed, not the run's shape: a run that fell
	// behind issues less (and says so, KeptUp); one that fell behind in
	// its warm-up catches up in its window, above the offer (116% of it
	// beside two CPU hogs, where the load alone issued 100%).
	assert.Equal(t, sw.TargetRate, alone.TargetRate, "the same offered load")
	assert.Positive(t, alone.Ops.Requests)
	assert.Zero(t, alone.Ops.Fired)
	assert.Zero(t, alone.Lateness.Count)
	assert.Positive(t, alone.CPUPerOp)
	for _, r := range c.Runs {
		require.NotNil(t, r.Library, r.Impl)
		assert.InDelta(t, r.CPUPerOp-alone.CPUPerOp, r.Library.PerOp, 1e-6, r.Impl)
	}
	for _, k := range []string{"cpu_per_op", "bytes_per_timer", "lateness_p99", "achieved_rate"} {
		assert.Contains(t, c.Ratios, k)
	}
	assert.NotContains(t, c.Ratios, "tick_lag_p99", "no ratio without an AfterFunc value")
	require.NotNil(t, env.Verdict)
	require.Len(t, env.Verdict.Summary, 3, "the load's line, the conclusion, the next step")
	assert.True(t, strings.HasPrefix(env.Verdict.Summary[1], "conclusion: "))
	assert.True(t, strings.HasPrefix(env.Verdict.Summary[2], "next: "))
	if offLoad(&c.Runs[0], env.Config.Load.Duration) == "" && offLoad(&c.Runs[1], env.Config.Load.Duration) == "" {
		assert.Contains(t, env.Verdict.Summary[0], "heap per timer ")
		assert.Contains(t, env.Verdict.Ratios, "proxy_load/cpu_per_op")
		assert.Contains(t, env.Verdict.Winners, "proxy_load/cpu_per_op")
	} else { // a busy host: the tiny load did not run as asked
		assert.Contains(t, env.Verdict.Summary[0], "proxy-shaped load: NOT COMPARABLE: ")
		assert.NotContains(t, env.Verdict.Ratios, "proxy_load/cpu_per_op")
	}

	// The raw document has the documented keys.
	var raw map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &raw))
	res := raw["results"].(map[string]any)["runs"].([]any)[0].(map[string]any)
	for _, k := range []string{"impl", "achieved_rate", "kept_up", "ops_per_sec", "cpu_ns", "cpu_per_op_ns", "library", "bytes_per_timer", "gc", "lateness", "tick_lag"} {
		assert.Contains(t, res, k)
	}
	assert.Contains(t, res["lateness"], "p99_ns")
	for _, k := range []string{"cpu_ns", "cpu_per_op_ns", "noise"} {
		assert.Contains(t, res["library"], k)
	}
	assert.Contains(t, raw["results"].(map[string]any)["load_alone"], "cpu_per_op_ns")

	text, err := os.ReadFile(filepath.Join(dir, "compare.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(text), "ratio")
	js, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	require.NoError(t, err)
	assert.JSONEq(t, stdout.String(), string(js))
	assert.Contains(t, stderr.String(), "results written to "+filepath.Join(dir, "compare.txt")+" and "+filepath.Join(dir, "compare.json")+"\n")
}

// TestCompareKeyed runs the load through the keyed API: requests are
// cancelled and connections reset by id, and the report says so.
//
// keyedArgs keeps the verdicts off the host's speed. The idle timeout is
// far longer than a run, so no idle timer can run and every Reset must
// find its connection; with tinyArgs' 300ms, reset about every 200ms, a
// fifth of the connections expired even when the load kept up, and on a
// host that left the load's worker behind most did. A response comes
// 1-20ms after its request, whose timeout is 300-600ms (50-400ms in
// tinyArgs): a Cancel misses only if the worker stalls for more than a
// quarter of a second, and with no background requests (-resident 0)
// the load is light enough to keep up beside other work.
func TestCompareKeyed(t *testing.T) {
	keyedArgs := func(extra ...string) []string {
		return tinyArgs("compare", append([]string{"-keyed", "-resident", "0",
			"-delay-min", "300ms", "-delay-max", "600ms", "-idle", "1h"}, extra...)...)
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(keyedArgs("-json"), &stdout, &stderr), stderr.String())
	env := decodeEnvelope[compareConfig, compareResults](t, stdout.Bytes())
	require.Len(t, env.Results.Runs, 2)
	assert.True(t, env.Config.Keyed)
	for _, r := range env.Results.Runs {
		assert.True(t, r.Keyed, r.Impl)
		assert.Contains(t, []string{callWheelKeyed, callStdlibKeyed}, r.Call)
		assert.Positive(t, r.Lateness.Count, "%s: timers fired in the window", r.Impl)
		require.Positive(t, r.Ops.Cancels, r.Impl)
		require.Positive(t, r.Ops.Resets, r.Impl)
		assert.Less(t, r.Ops.Missed, r.Ops.Cancels/10, "%s: Cancel finds the requests by id", r.Impl)
		// No idle timer can have run: a Reset that did not find its
		// timer by id reopened the connection.
		assert.Zero(t, r.Ops.Reopened, "%s: Reset finds the connections by id", r.Impl)
	}

	stdout.Reset()
	require.Equal(t, exitOK, run(keyedArgs(), &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "calls, by key: shardwheel ix.AfterFunc, ix.Cancel, ix.Reset (an Index)")
}

func TestCompareInterruptedMidRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int)
	go func() { done <- runContext(ctx, tinyArgs("compare", "-duration", "30s", "-json"), &stdout, &stderr) }()
	// Cancel once shardwheel's measured window has begun.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "measure") }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop after cancel")
	}
	assert.Equal(t, exitInterrupted, code)

	env := decodeEnvelope[compareConfig, compareResults](t, stdout.Bytes())
	c := env.Results
	assert.True(t, env.Interrupted)
	require.Len(t, c.Runs, 1, "shardwheel partly measured, AfterFunc not at all")
	r := c.Runs[0]
	assert.Equal(t, nameWheel, r.Impl)
	assert.True(t, r.Partial)
	assert.Positive(t, r.Measured)
	assert.Less(t, r.Measured, 30*time.Second, "cut short of the 30s asked")
	assert.Positive(t, r.Ops.Requests)
	assert.Nil(t, c.Ratios)
	assert.Nil(t, c.LoadAlone)
	assert.Nil(t, r.Library, "nothing to subtract")
}

func TestCompareTextPartial(t *testing.T) {
	c := &Comparison{Host: host(), Load: defaultLoad(), Interrupted: true,
		Results: []Result{{Impl: nameWheel, Partial: true, Measured: time.Second, TargetRate: 1, AchievedRate: 1, KeptUp: true}}}
	var b bytes.Buffer
	require.NoError(t, c.writeText(&b))
	assert.Contains(t, b.String(), "INTERRUPTED: shardwheel was measured for 1s only.")
	assert.Contains(t, b.String(), "INTERRUPTED: load alone was not measured.")
	assert.Contains(t, b.String(), "INTERRUPTED: time.AfterFunc was not measured.")
	assert.Regexp(t, regexp.MustCompile(`(?m)^  library CPU per call\s+n/a\s+-$`), b.String())
	assert.NotContains(t, b.String(), "load alone (no timer work)")
	assert.Regexp(t, regexp.MustCompile(`(?m)^  CPU per call\s+\S+\s+-$`), b.String())
	assert.NotContains(t, b.String(), "verdict:", "nothing to conclude from one implementation")
}

func TestCompareTextFellBehind(t *testing.T) {
	c := &Comparison{Host: host(), Load: defaultLoad(),
		Results: []Result{{Impl: nameStdlib, Measured: time.Second, TargetRate: 100, AchievedRate: 50, MaxBacklog: time.Second}}}
	var b bytes.Buffer
	require.NoError(t, c.writeText(&b))
	assert.Contains(t, b.String(), "WARNING: time.AfterFunc issued 50% of the offered 100 requests/s")
}

// A library figure within noise is shown, marked and explained, without a
// ratio; the other keeps its ratio.
func TestCompareTextNoise(t *testing.T) {
	result := func(impl string, cpu time.Duration, calls int64) Result {
		return Result{Impl: impl, Measured: 10 * time.Second, TargetRate: 1, AchievedRate: 1, KeptUp: true,
			CPU: cpu, CPUPerOp: float64(cpu) / float64(calls), OpsPerSec: float64(calls) / 10,
			Ops: opCounts{Schedules: calls / 2, Cancels: calls / 2}}
	}
	alone := result(nameNull, 2*time.Second, 5_000_000) // 400ns per call
	c := &Comparison{Host: host(), Load: defaultLoad(), LoadAlone: &alone,
		Results: []Result{
			result(nameWheel, 1900*time.Millisecond, 5_000_000),  // 380ns: -20ns
			result(nameStdlib, 3500*time.Millisecond, 5_000_000), // 700ns: 300ns
		}}
	for i := range c.Results {
		c.Results[i].Library = libraryCost(&c.Results[i], c.LoadAlone)
	}
	c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	assert.NotContains(t, c.Ratios, "library_cpu_per_op")
	assert.Contains(t, c.Ratios, "cpu_per_op")

	var b bytes.Buffer
	require.NoError(t, c.writeText(&b))
	out := b.String()
	assert.Regexp(t, `(?m)^  library CPU per call\s+-20ns \(noise\)\s+300ns\s+n/a\s+noise: below 10% of the load alone's$`, out)
	assert.Regexp(t, `(?m)^  library CPU \(cores\)\s+-0\.01 \(noise\)\s+0\.15\s+n/a\s+noise: below 10% of the load alone's$`, out)
	assert.Regexp(t, `(?m)^  CPU per call\s+380ns\s+700ns\s+0\.54x\s+shardwheel$`, out)
	assert.Contains(t, out, "CPU per call 0.54x (load included: the library's own share is within noise)")
	assert.Contains(t, out, "load alone (no timer work): CPU 2s (0.2 cores busy), 500k calls/s, 400ns per call\n")
	assert.Contains(t, out, "NOISE: shardwheel's library CPU per call, -20ns, is below 10% of the load alone's")
	assert.Contains(t, out, "weighing more per call alone (500k calls/s, against 500k).\n")
	assert.NotContains(t, out, "NOISE: time.AfterFunc")
}

// fellBehind returns a comparison of the default load in which
// time.AfterFunc issued share of the offered rate and its window lasted
// window, both sides on a host that other processes kept busy.
func fellBehind(share float64, window time.Duration) *Comparison {
	l := defaultLoad()
	run := func(impl string, share float64, window time.Duration) Result {
		return Result{Impl: impl, Call: impl, Tick: time.Millisecond, Measured: window, TargetRate: l.Rate, AchievedRate: share * l.Rate,
			KeptUp: share >= 0.98, MaxBacklog: 600 * time.Millisecond, CPU: window / 2, CPUPerOp: 500, OpsPerSec: 1e5,
			BytesPerTimer: 100, OtherCPU: window}
	}
	c := &Comparison{Host: Host{NumCPU: 2}, Load: l, Results: []Result{
		run(nameWheel, 1, l.Duration), run(nameStdlib, share, window)}}
	c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	return c
}

// TestCompareVerdictWhenASideFellBehind: when time.AfterFunc managed 35%
// of the offered load and its 10s window ran 21s, the verdict leads with
// the figures not comparing and why, rates none of them, concludes
// nothing from that load, and says what to do: a quieter host or a lower
// -rate; the report warns once that the host was busy, and says the
// shortfall once, in the verdict.
func TestCompareVerdictWhenASideFellBehind(t *testing.T) {
	c := fellBehind(0.35, 21*time.Second)
	v := c.verdict()
	require.Len(t, v.Summary, 3)
	assert.Equal(t, "proxy-shaped load: NOT COMPARABLE: time.AfterFunc issued 35% of the offered 300k requests/s "+
		"(it fell up to 600ms behind) and its 10s window ran 21s: the host could not run the load as asked, "+
		"so the figures above measure the host as much as the timers.", v.Summary[0])
	assert.Equal(t, "conclusion: none: no load ran as asked, so no figure compares.", v.Summary[1])
	assert.Equal(t, "next: rerun on a quieter host (with nothing else running), or offer less load: go run ./bench -rate 84000.", v.Summary[2])
	assert.Empty(t, v.Ratios, "no ratio of figures that do not compare")
	assert.Empty(t, v.Winners)

	var b bytes.Buffer
	require.NoError(t, c.writeText(&b))
	out := b.String()
	assert.Equal(t, 1, strings.Count(out, "other processes kept the host busy"), "one warning for the busy host:\n%s", out)
	assert.Contains(t, out, "WARNING: other processes kept the host busy during the shardwheel (1 of 2 CPUs) and time.AfterFunc (1 of 2 CPUs) runs")
	assert.Equal(t, 1, strings.Count(out, "issued 35%"), "the shortfall is said once, in the verdict:\n%s", out)
	assert.NotContains(t, out, "library CPU per call 0.", "no ratio in the verdict")

	// A window far longer than asked alone does too: half the load.
	v = fellBehind(1, 16*time.Second).verdict()
	assert.Contains(t, v.Summary[0], "NOT COMPARABLE: time.AfterFunc's 10s window ran 16s: ")
	assert.Contains(t, v.Summary[2], "-rate 150000.")
}

// TestCompareVerdictWhenBothRanTheLoad: within the margins (96% of the
// rate, a window 20% long) the figures compare: the verdict rates them,
// concludes in one line, and points on.
func TestCompareVerdictWhenBothRanTheLoad(t *testing.T) {
	c := fellBehind(0.96, 12*time.Second)
	c.Results[0].CPUPerOp, c.Results[0].BytesPerTimer = 300, 50
	c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	v := c.verdict()
	require.Len(t, v.Summary, 3)
	assert.True(t, strings.HasPrefix(v.Summary[0], "proxy-shaped load, shardwheel (shardwheel) against time.AfterFunc: CPU per call 0.60x"), v.Summary[0])
	assert.Equal(t, "conclusion: on the proxy-shaped load, shardwheel's figures against time.AfterFunc's: its CPU lower (0.60x); its heap lower (0.50x).", v.Summary[1])
	assert.True(t, strings.HasPrefix(v.Summary[2], "next: for figures to publish, rerun on a quiet host"), "the host was busy: %s", v.Summary[2])
	assert.Contains(t, v.Ratios, "proxy_load/cpu_per_op")

	var b bytes.Buffer
	require.NoError(t, c.writeText(&b))
	assert.Equal(t, 1, strings.Count(b.String(), "issued 96%"), "a run a little behind is noted once, by the table's notes")
}

// TestCompareConclusionLoadByLoad: where the loads disagree on a figure,
// the conclusion says it load by load; where they agree, at once.
func TestCompareConclusionLoadByLoad(t *testing.T) {
	c := &Comparison{ChurnConfig: ChurnConfig{Goroutines: []int{2}}}
	v := Verdict{Ratios: map[string]float64{
		"proxy_load/library_cpu_per_op": 1.49, "proxy_load/bytes_per_timer": 0.56,
		"churn/g2/wheel/cpu_per_pair": 0.36, "churn/g2/keyed/cpu_per_pair": 0.40,
		"churn/g2/wheel/heap_objects": 0.40, "churn/g2/keyed/heap_objects": 0.41,
	}}
	assert.Equal(t, "on the proxy-shaped load and the churn, shardwheel's figures against time.AfterFunc's: "+
		"its CPU higher on the proxy-shaped load (1.49x) and lower on the churn (0.36x-0.40x); its heap lower (0.40x-0.56x).",
		c.conclusion(v, false))
}

// TestCompareConclusionNamesEveryLoss: a conclusion that reports CPU and
// heap wins also names each figure the runtime's timers did better on,
// with both figures: here a lateness of 208ms against 136ms on the
// proxy-shaped load, and the churn's probe p99, where s.AfterFunc lost to
// time.AfterFunc though s.AfterFunc(ByKey) beat both (the row's winner).
func TestCompareConclusionNamesEveryLoss(t *testing.T) {
	c := fellBehind(1, 10*time.Second)
	c.Results[0].CPUPerOp, c.Results[0].BytesPerTimer = 300, 50
	for i, p99 := range []time.Duration{208 * time.Millisecond, 136 * time.Millisecond} {
		c.Results[i].Lateness = hist.Percentiles{P50: 2 * time.Millisecond, P99: p99, P999: p99, Max: p99, Count: 100_000}
	}
	c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	c.ChurnConfig = defaultChurnConfig()
	c.ChurnConfig.Goroutines = []int{2}
	c.Churn = churnSummaries(2, 700, 240, 250)
	c.Churn.summarize(c.ChurnConfig)
	p99 := map[string]time.Duration{churnStd: time.Millisecond, churnWheel: 3 * time.Millisecond, churnKeyed: 500 * time.Microsecond}
	for i := range c.Churn.Summaries {
		s := &c.Churn.Summaries[i]
		d := float64(p99[s.Impl])
		s.Figures["probe_p99"] = spread{Median: d, Min: d, Max: d}
	}
	v := c.verdict()
	require.Equal(t, churnKeyed, v.Winners["churn/g2/probe_p99"], "the row's winner is s.AfterFunc(ByKey)")
	concl := v.Summary[len(v.Summary)-2]
	require.True(t, strings.HasPrefix(concl, "conclusion: "), concl)
	assert.Contains(t, concl, "its CPU lower")
	assert.Contains(t, concl, "time.AfterFunc did better on the proxy-shaped load's lateness p99 (208ms against 136ms)")
	for _, m := range reportRows(true) {
		if v.Winners["proxy_load/"+m.key] == nameStdlib {
			assert.Contains(t, concl, "the proxy-shaped load's "+m.label+" (", "%s, won by time.AfterFunc, is named", m.key)
		}
	}
	assert.Contains(t, concl, "the churn's probe lateness p99 at 2 goroutines (s.AfterFunc 3ms against 1ms)")
	assert.NotContains(t, concl, "s.AfterFunc(ByKey) 500µs", "s.AfterFunc(ByKey) beat time.AfterFunc there")
	assert.NotContains(t, concl, "CPU per schedule+cancel pair at", "shardwheel's CPU won")
}
