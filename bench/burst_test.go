package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBurstRun(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"burst", "-timers", "20000", "-spread", "100ms", "-runs", "2", "-tick", "1ms", "-shards", "2", "-json", "-out", dir}
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())

	env := decodeEnvelope[BurstSpec, burstResults](t, stdout.Bytes())
	assert.Equal(t, "burst", env.Command)
	assert.Equal(t, 20000, env.Config.Timers)
	b := env.Results
	require.Len(t, b.Runs, 4, "two runs of each, interleaved")
	assert.Contains(t, b.Summaries[nameWheel], "lateness_p99")
	require.NotNil(t, env.Verdict)
	assert.Contains(t, env.Verdict.Summary, "Every timer ran exactly once, none early, in every run.")
	assert.Contains(t, env.Verdict.Winners, "lateness_p99")
	assert.Equal(t, []string{nameWheel, nameStdlib, nameWheel, nameStdlib},
		[]string{b.Runs[0].Impl, b.Runs[1].Impl, b.Runs[2].Impl, b.Runs[3].Impl})
	for _, r := range b.Runs {
		assert.Zero(t, r.Early, "%s: a timer ran before its deadline", r.Impl)
		assert.Zero(t, r.Doubles, r.Impl)
		assert.Zero(t, r.Missing, r.Impl)
		assert.Equal(t, uint64(20000), r.Lateness.Count, r.Impl)
		assert.GreaterOrEqual(t, r.Lateness.P50, time.Duration(0))
		assert.LessOrEqual(t, r.Lateness.P50, r.Lateness.P99)
		assert.LessOrEqual(t, r.Lateness.P99, r.Lateness.Max)
		assert.Positive(t, r.GoroutinesPeak)
		if r.Impl == nameWheel {
			require.NotNil(t, r.Stats)
			assert.Equal(t, uint64(20000), r.Stats.Lateness.Count, "Stats saw every task")
		} else {
			assert.Nil(t, r.Stats)
		}
	}
	text, err := os.ReadFile(filepath.Join(dir, "burst.txt"))
	require.NoError(t, err)
	for _, want := range []string{"lateness p50", "lateness p99.9", "early fires", "goroutines peak", "CPU", "Stats lateness",
		"20,000 timers from 2 goroutines", "2 shards", "2 runs of each", "\nverdict:\n  burst of 20,000 timers"} {
		assert.Contains(t, string(text), want)
	}
	assert.Regexp(t, `(?m)^median \(min-max\)\s+shardwheel\s+time\.AfterFunc\s+ratio\s+winner$`, string(text))
	assert.Regexp(t, `(?m)^early fires \(must be 0\)\s+0\s+0$`, string(text), "no range of equal runs, no ratio of 0s")
	assert.NotContains(t, string(text), "0.00x")
	assert.Contains(t, stderr.String(), "burst: 4 phases, about ")
	assert.Contains(t, stderr.String(), "phase 4 of 4 (about ")
}

// TestBurstOneRun: one run has no range to show, and plurals agree.
func TestBurstOneRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"burst", "-timers", "5000", "-spread", "50ms", "-runs", "1", "-producers", "1", "-shards", "1"}
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "5,000 timers from 1 goroutine,")
	assert.Contains(t, out, "1 shard,")
	assert.Contains(t, out, "1 run of each")
	assert.Regexp(t, `(?m)^one run\s+shardwheel\s+time\.AfterFunc\s+ratio\s+winner$`, out)
	assert.NotRegexp(t, `\(\S+-\S+\)`, out, "no (x-x) range")
	assert.NotContains(t, out, "noise", "percentiles of 5000 timers are figures")
}

// TestBurstInterrupted: Ctrl-C during burst is an interruption like every
// other command's (exit 130, "interrupted"), not an error.
func TestBurstInterrupted(t *testing.T) {
	stdout, stderr := interruptAt(t, []string{"burst", "-timers", "1000", "-spread", "1m", "-runs", "2", "-json"}, "phase 1 of 4")
	assert.NotContains(t, stderr, "context canceled")
	env := decodeEnvelope[BurstSpec, burstResults](t, stdout)
	assert.True(t, env.Interrupted)
	assert.Empty(t, env.Results.Runs, "the interrupted run is left out")
}

func TestExactPercentiles(t *testing.T) {
	v := make([]time.Duration, 1000)
	for i := range v {
		v[i] = time.Duration(1000 - i) // reversed: it sorts
	}
	p := exactPercentiles(v)
	assert.Equal(t, time.Duration(501), p.P50)
	assert.Equal(t, time.Duration(991), p.P99)
	assert.Equal(t, time.Duration(1000), p.P999)
	assert.Equal(t, time.Duration(1000), p.Max)
	assert.Equal(t, uint64(1000), p.Count)
	assert.Zero(t, exactPercentiles(nil).Count)
}
