package main

import (
	"bytes"
	"encoding/json"
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

	var b Burst
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &b), stdout.String())
	require.Len(t, b.Runs, 4, "two runs of each, interleaved")
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
	for _, want := range []string{"lateness p50", "lateness p99.9", "early fires", "goroutines peak", "CPU", "Stats lateness"} {
		assert.Contains(t, string(text), want)
	}
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
