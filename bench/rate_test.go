package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRateRun: the rate command runs every implementation and the
// baseline at every rate, in every round, rotating their order; the JSON
// holds each window, the text one row per rate with both ratios.
func TestRateRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"rate", "-rates", "200,5000", "-rounds", "2", "-window", "150ms", "-shards", "2", "-json"}
	require.Equal(t, exitOK, run(args, &stdout, &stderr), stderr.String())
	env := decodeEnvelope[RateSpec, []RateResult](t, stdout.Bytes())
	assert.Equal(t, "rate", env.Command)
	assert.Equal(t, []float64{200, 5000}, env.Config.Rates)
	runs := env.Results
	require.Len(t, runs, 2*2*len(rateImpls))
	assert.Equal(t, rateImpls[0], runs[0].Impl, "round 1 starts with the first")
	assert.Equal(t, rateImpls[1], runs[2*len(rateImpls)].Impl, "round 2 with the second")
	seen := map[string]int{}
	for _, r := range runs {
		seen[r.Impl]++
		assert.Positive(t, r.CPU, "%s at %v/s: the process used some CPU", r.Impl, r.Rate)
		if r.Impl == rateNone {
			assert.Zero(t, r.Wakeups)
			continue
		}
		// Paced, never ahead, and a worker that fell behind drops what
		// it missed rather than catch up in a burst: a starved host may
		// issue less, never more, but for the maxBehind periods it may
		// catch up on and the period that straddles the window's start
		// (one worker at these rates, a batch a period: a timer at 200/s,
		// 5 every millisecond at 5000/s, as rateRun paces them).
		assert.Positive(t, r.Issued, "%s at %v/s", r.Impl, r.Rate)
		window, batch := 0.150, max(int(r.Rate/1000), 1)
		assert.LessOrEqual(t, r.Issued, r.Rate+float64((maxBehind+1)*batch)/window, "%s at %v/s", r.Impl, r.Rate)
		if r.Impl == rateWheelCtx || r.Impl == rateWheelFunc {
			// At most a wake-up a tick (1ms), and the Stats reads
			// that mark the window (each may wake a shard): far
			// below, as the timers are cancelled long before due.
			assert.LessOrEqual(t, r.Wakeups, 1000+2/0.15, "%s at %v/s: wake-ups per second per shard", r.Impl, r.Rate)
		} else {
			assert.Zero(t, r.Wakeups, "no shard")
		}
	}
	for _, impl := range rateImpls {
		assert.Equal(t, 4, seen[impl], impl)
	}

	stdout.Reset()
	require.Equal(t, exitOK, run([]string{"rate", "-rates", "300", "-rounds", "1", "-window", "100ms"}, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "timeouts of 100ms, each cancelled 20ms later")
	assert.Regexp(t, `(?m)^timers/s\s+context\.WithTimeout\s+s\.WithTimeout\s+ratio\s+time\.AfterFunc\s+s\.AfterFunc\s+ratio`, out)
	assert.Regexp(t, `(?m)^300\s+\S+ \[`, out)
}

// TestRateFlags: bad values name the flag.
func TestRateFlags(t *testing.T) {
	for _, tt := range []struct{ args []string }{
		{[]string{"-rates", "0"}},
		{[]string{"-rates", "x"}},
		{[]string{"-timeout", "10ms"}},
		{[]string{"-cancel-after", "0s"}},
		{[]string{"-window", "10ms"}},
		{[]string{"-rounds", "0"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"rate"}, tt.args...), &stdout, &stderr)
		assert.Equal(t, exitUsage, code, "%v: %s", tt.args, stderr.String())
		assert.Contains(t, stderr.String(), tt.args[0], tt.args)
	}
}
