package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/hist"
)

func TestTuneRun(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := tinyArgs("tune", "-shards", "1,2", "-ticks", "5ms", "-duration", "500ms", "-repeats", "2", "-json", "-out", dir)
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())

	env := decodeEnvelope[tuneConfig, tuneResults](t, stdout.Bytes())
	assert.Equal(t, "tune", env.Command)
	assert.Equal(t, []int{1, 2}, env.Config.Shards)
	assert.Equal(t, 2, env.Config.Repeats)
	assert.Equal(t, 2*time.Millisecond, env.Config.LagTarget)
	tu := env.Results
	require.NotNil(t, env.Verdict)
	if tu.MetTarget {
		assert.Equal(t, "Recommended: shardwheel.New("+tu.Options+").", env.Verdict.Summary[0])
	} else {
		assert.Equal(t, "No point meets the targets; the closest: shardwheel.New("+tu.Options+").", env.Verdict.Summary[0])
	}
	require.Len(t, tu.Points, 2)
	assert.Equal(t, 1, tu.Points[0].Shards)
	assert.Equal(t, 2, tu.Points[1].Shards)
	require.GreaterOrEqual(t, tu.Recommended, 0)
	require.Less(t, tu.Recommended, len(tu.Points), "the recommendation is a swept point")
	best := tu.Points[tu.Recommended]
	assert.Equal(t, fmt.Sprintf("shardwheel.WithShards(%d), shardwheel.WithTick(5 * time.Millisecond)", best.Shards), tu.Options)
	assert.Greater(t, len(env.Verdict.Summary), 1, "the reasoning follows")
	for _, pt := range tu.Points {
		require.NotNil(t, pt.Result.TickLag)
		assert.Equal(t, pt.Shards, pt.Result.Shards)
		require.Len(t, pt.Runs, 2, "two rounds")
		assert.LessOrEqual(t, pt.CPUPerOpRange[0], pt.Result.CPUPerOp, "the median lies in the range")
		assert.GreaterOrEqual(t, pt.CPUPerOpRange[1], pt.Result.CPUPerOp)
	}
	assert.Contains(t, stderr.String(), "tune: 4 phases, about ")
	assert.Contains(t, stderr.String(), "phase 4 of 4 (about ")
	assert.Contains(t, stderr.String(), "round 2 of 2, point 2 of 2: 2 shards, tick 5ms")

	text, err := os.ReadFile(filepath.Join(dir, "tune.txt"))
	require.NoError(t, err)
	if tu.MetTarget {
		assert.Contains(t, string(text), "ok <- recommended")
	} else {
		assert.Contains(t, string(text), "fails <- closest")
	}
	assert.Contains(t, string(text), "shardwheel.New("+tu.Options+")")
}

// TestTuneNeverRecommendsAFailingPoint: when no point meets the targets,
// the report does not call the point it offers recommended (it fails
// them like the rest): the table marks it the closest, the text and the
// verdict say no point meets the targets; when one does, it is
// recommended and marked ok.
func TestTuneNeverRecommendsAFailingPoint(t *testing.T) {
	for _, met := range []bool{false, true} {
		lag := 5 * time.Millisecond
		if met {
			lag = time.Millisecond
		}
		tu := &Tuning{LagTarget: 2 * time.Millisecond, Points: []TunePoint{
			point(1, time.Millisecond, lag, 100, true),
			point(2, time.Millisecond, 9*time.Millisecond, 90, true),
		}}
		for i := range tu.Points {
			tu.Points[i].Fails = tu.fails(&tu.Points[i].Result)
		}
		tu.recommend()
		require.Equal(t, 0, tu.Recommended)
		require.Equal(t, met, tu.MetTarget)
		var b bytes.Buffer
		require.NoError(t, tu.writeText(&b))
		text, summary := b.String(), tu.envelope().Verdict.Summary[0]
		if met {
			assert.Contains(t, text, "ok <- recommended")
			assert.Contains(t, text, "Recommended:\n")
			assert.Equal(t, "Recommended: shardwheel.New("+tu.Options+").", summary)
			continue
		}
		assert.NotContains(t, text, "recommended", "a point that fails the targets is not recommended")
		assert.NotContains(t, text, "Recommended")
		assert.Contains(t, text, "fails <- closest")
		assert.Contains(t, text, "No point meets the targets. The closest (the lowest tick lag p99)")
		assert.Contains(t, text, "s, err := shardwheel.New("+tu.Options+")")
		assert.Equal(t, "No point meets the targets; the closest: shardwheel.New("+tu.Options+").", summary)
	}
}

// point returns a measured tune point with the given figures.
func point(shards int, tick, lagP99 time.Duration, cpuPerOp float64, keptUp bool) TunePoint {
	return TunePoint{Shards: shards, Tick: tick, Result: Result{
		Measured: time.Second, TargetRate: 100, AchievedRate: 100, KeptUp: keptUp,
		CPU: time.Duration(cpuPerOp * 1000), CPUPerOp: cpuPerOp,
		TickLag: &hist.Percentiles{P99: lagP99},
	}}
}

func TestRecommend(t *testing.T) {
	tests := []struct {
		name   string
		points []TunePoint
		want   int
		met    bool
	}{
		{"cheapest that meets", []TunePoint{
			point(1, time.Millisecond, 5*time.Millisecond, 100, true), // lag too high, cheapest
			point(2, time.Millisecond, time.Millisecond, 300, true),
			point(2, 10*time.Millisecond, time.Millisecond, 200, true),
		}, 2, true},
		{"falling behind fails", []TunePoint{
			point(1, time.Millisecond, time.Millisecond, 100, false),
			point(2, time.Millisecond, time.Millisecond, 300, true),
		}, 1, true},
		{"none meets: lowest lag", []TunePoint{
			point(1, time.Millisecond, 9*time.Millisecond, 100, true),
			point(2, time.Millisecond, 3*time.Millisecond, 300, true),
			point(4, time.Millisecond, 4*time.Millisecond, 200, true),
		}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tu := &Tuning{LagTarget: 2 * time.Millisecond, Points: tt.points}
			for i := range tu.Points {
				tu.Points[i].Fails = tu.fails(&tu.Points[i].Result)
			}
			tu.recommend()
			assert.Equal(t, tt.want, tu.Recommended)
			assert.Equal(t, tt.met, tu.MetTarget)
			best := tu.Points[tt.want]
			assert.Equal(t, fmt.Sprintf("shardwheel.WithShards(%d), shardwheel.WithTick(%s)", best.Shards, goDuration(best.Tick)), tu.Options)
			// Every failing point is explained.
			var failed int
			for _, r := range tu.Reasoning {
				if len(r) > 7 && r[:7] == "Failed:" {
					failed++
				}
			}
			var fails int
			for _, pt := range tu.Points {
				if pt.Fails != "" {
					fails++
				}
			}
			assert.Equal(t, fails, failed)
		})
	}
}

func TestRecommendTieOnCPU(t *testing.T) {
	coarse := point(1, 5*time.Millisecond, time.Millisecond, 100, true)
	coarse.Result.Lateness.P99 = 10 * time.Millisecond
	fine := point(1, time.Millisecond, time.Millisecond, 103, true)
	fine.Result.Lateness.P99 = 2 * time.Millisecond
	costly := point(2, time.Millisecond, time.Millisecond, 150, true)
	costly.Result.Lateness.P99 = time.Millisecond
	tu := &Tuning{LagTarget: 2 * time.Millisecond, Points: []TunePoint{coarse, fine, costly}}
	tu.recommend()
	assert.Equal(t, 1, tu.Recommended, "3% more CPU is noise; the finer tick runs timers less late")
	assert.Contains(t, tu.Reasoning[1], "2 points cost the same within 5%")
	assert.Contains(t, tu.Reasoning[2], "Next cheapest: 2 shards, tick 1ms at +46% CPU per call.")
}

func TestSummarizeTakesMedians(t *testing.T) {
	pt := TunePoint{Shards: 1, Tick: time.Millisecond}
	for _, f := range []struct {
		cpu       float64
		lag, late time.Duration
	}{{100, 3 * time.Millisecond, 9 * time.Millisecond}, {300, time.Millisecond, 2 * time.Millisecond}, {200, 2 * time.Millisecond, 4 * time.Millisecond}} {
		r := point(1, time.Millisecond, f.lag, f.cpu, true).Result
		r.Lateness.P99 = f.late
		pt.Runs = append(pt.Runs, r)
	}
	pt.Runs[2].KeptUp = false
	pt.summarize()
	assert.InDelta(t, 200, pt.Result.CPUPerOp, 1e-9)
	assert.Equal(t, 2*time.Millisecond, pt.Result.TickLag.P99)
	assert.Equal(t, 4*time.Millisecond, pt.Result.Lateness.P99)
	assert.False(t, pt.Result.KeptUp, "kept up only if every run did")
	assert.Equal(t, [2]float64{100, 300}, pt.CPUPerOpRange)
	assert.Equal(t, [2]time.Duration{time.Millisecond, 3 * time.Millisecond}, pt.LagP99Range)
	assert.Equal(t, [2]time.Duration{2 * time.Millisecond, 9 * time.Millisecond}, pt.LatenessP99Range)
}

func TestRecommendTieWidensWithSpread(t *testing.T) {
	cheap := point(1, 5*time.Millisecond, time.Millisecond, 100, true)
	cheap.CPUPerOpRange = [2]float64{80, 120} // its own runs spread 40%
	cheap.Result.Lateness.P99 = 10 * time.Millisecond
	fine := point(1, time.Millisecond, time.Millisecond, 130, true)
	fine.Result.Lateness.P99 = 2 * time.Millisecond
	tu := &Tuning{LagTarget: 2 * time.Millisecond, Points: []TunePoint{cheap, fine}}
	tu.recommend()
	assert.Equal(t, 1, tu.Recommended, "30% apart is within the cheapest point's own 40% spread")
	assert.Contains(t, tu.Reasoning[1], "2 points cost the same within 40%")
}

func TestRecommendLatenessTarget(t *testing.T) {
	fine := point(2, time.Millisecond, time.Millisecond, 300, true)
	fine.Result.Lateness.P99 = 2 * time.Millisecond
	coarse := point(2, 50*time.Millisecond, time.Millisecond, 100, true)
	coarse.Result.Lateness.P99 = 90 * time.Millisecond
	tu := &Tuning{LagTarget: 2 * time.Millisecond, LatenessTarget: 10 * time.Millisecond, Points: []TunePoint{coarse, fine}}
	for i := range tu.Points {
		tu.Points[i].Fails = tu.fails(&tu.Points[i].Result)
	}
	tu.recommend()
	assert.Equal(t, 1, tu.Recommended)
	assert.Contains(t, tu.Points[0].Fails, "lateness p99 90ms > 10ms")
}

func TestRecommendNothingMeasured(t *testing.T) {
	tu := &Tuning{Recommended: -1}
	tu.recommend()
	assert.Equal(t, -1, tu.Recommended)
	var b bytes.Buffer
	require.NoError(t, tu.writeText(&b))
	assert.Contains(t, b.String(), "No point was measured.")
}

func TestGoDuration(t *testing.T) {
	assert.Equal(t, "time.Millisecond", goDuration(time.Millisecond))
	assert.Equal(t, "5 * time.Millisecond", goDuration(5*time.Millisecond))
	assert.Equal(t, "1500 * time.Microsecond", goDuration(1500*time.Microsecond))
	assert.Equal(t, "2 * time.Second", goDuration(2*time.Second))
}

func TestTuneCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := parseArgs(tinyArgs("tune"))
	require.NoError(t, err)
	tu, err := tune(ctx, o, newProgress(io.Discard))
	require.NoError(t, err)
	assert.True(t, tu.Interrupted)
	assert.Empty(t, tu.Points)
	assert.Equal(t, -1, tu.Recommended)
}

// TestTuneTextOneRun: a point of one run shows its figures without a
// (x-x) range, and counts agree with their nouns.
func TestTuneTextOneRun(t *testing.T) {
	pt := point(1, time.Millisecond, time.Millisecond, 100, true)
	pt.Runs = []Result{pt.Result}
	pt.summarize()
	tu := &Tuning{Host: host(), Load: defaultLoad(), LagTarget: 2 * time.Millisecond, Points: []TunePoint{pt}}
	tu.recommend()
	var b bytes.Buffer
	require.NoError(t, tu.writeText(&b))
	out := b.String()
	assert.Contains(t, out, "1 run per point: one run each")
	assert.NotRegexp(t, `\(\S+-\S+\)`, out, "no range of one run")
	assert.Contains(t, out, "with the least CPU of the points that do (1 of 1)")
	assert.Contains(t, out, "Trade-off at 1 shard (")
}

// TestSummarizeLagP50: the lag p50 column is the median of the runs, with
// their range, like the other figures, not the first run's.
func TestSummarizeLagP50(t *testing.T) {
	pt := TunePoint{Shards: 1, Tick: time.Millisecond}
	for _, p50 := range []time.Duration{9 * time.Millisecond, time.Millisecond, 3 * time.Millisecond} {
		r := point(1, time.Millisecond, time.Millisecond, 100, true).Result
		r.TickLag.P50 = p50
		pt.Runs = append(pt.Runs, r)
	}
	pt.summarize()
	assert.Equal(t, 3*time.Millisecond, pt.Result.TickLag.P50, "the median, not the first run's 9ms")
	assert.Equal(t, [2]time.Duration{time.Millisecond, 9 * time.Millisecond}, pt.LagP50Range)
	tu := &Tuning{Host: host(), Load: defaultLoad(), LagTarget: 2 * time.Millisecond, Points: []TunePoint{pt}}
	tu.recommend()
	var b bytes.Buffer
	require.NoError(t, tu.writeText(&b))
	assert.Contains(t, b.String(), " 3ms (1ms-9ms) ")
}

// TestTuneBusyWarningAllRuns: a point is warned of when any of its runs
// was busy, not only its first, and the warning counts runs and points.
func TestTuneBusyWarningAllRuns(t *testing.T) {
	quiet := point(1, time.Millisecond, time.Millisecond, 100, true)
	busy := quiet.Result
	busy.OtherCPU = busy.Measured // a whole core
	quiet.Runs = []Result{quiet.Result, busy, quiet.Result}
	quiet.summarize()
	other := point(2, time.Millisecond, time.Millisecond, 100, true)
	other.Runs = []Result{other.Result, other.Result, other.Result}
	other.summarize()
	tu := &Tuning{Host: Host{NumCPU: 2}, Load: defaultLoad(), LagTarget: 2 * time.Millisecond, Points: []TunePoint{quiet, other}}
	tu.recommend()
	assert.Contains(t, tu.Reasoning, "WARNING: other processes kept the host busy during 1 of 6 runs, at 1 of 2 points: their lag is inflated; rerun on a quiet host.")

	tu.Points[0].Runs[1] = tu.Points[0].Runs[0]
	tu.recommend()
	for _, r := range tu.Reasoning {
		assert.NotContains(t, r, "WARNING")
	}
}
