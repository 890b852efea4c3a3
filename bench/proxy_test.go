package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets proxy, churn and spike re-execute the test binary as
// their child processes, as they re-execute the command itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == proxyLoadCmd || os.Args[1] == churnRunCmd || os.Args[1] == spikeRunCmd) {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestProxyTiny runs the proxy command at a tiny scale: both deadlines
// serve requests, time the slow ones out with 504, never before their
// deadline, and the proxy process is measured.
func TestProxyTiny(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := runContext(context.Background(), []string{"proxy", "-json", "-out", dir, "-rounds", "2",
		"-duration", "400ms", "-warmup", "100ms", "-clients", "4", "-slow", "0.3", "-slow-for", "300ms",
		"-timeout", "50ms", "-tick", "1ms"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	env := decodeEnvelope[proxyEnvConfig, proxyResults](t, stdout.Bytes())
	assert.Equal(t, "proxy", env.Command)
	assert.Equal(t, 2, env.Config.Rounds)
	run := env.Results
	require.Len(t, run.Results, 2)
	for _, r := range run.Results {
		assert.Equal(t, 2, r.Runs, r.Impl)
		assert.Positive(t, r.OK, r.Impl)
		assert.Positive(t, r.Timeouts, r.Impl)
		assert.Zero(t, r.Errors, r.Impl)
		assert.Zero(t, r.Early, "%s: a 504 before the deadline", r.Impl)
		assert.Positive(t, r.TimeoutLate.Count, r.Impl)
		assert.Positive(t, r.Served, r.Impl)
		assert.Positive(t, r.AllocsPerReq, r.Impl)
		assert.Positive(t, r.Latency.P50, r.Impl)
	}
	assert.Equal(t, []string{nameCtxStdlib, nameCtxWheel}, []string{run.Results[0].Impl, run.Results[1].Impl})
	assert.Contains(t, run.Ratios, "cpu_per_request")
	text, err := os.ReadFile(filepath.Join(dir, "proxy.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(text), "504s before the deadline")
	assert.Regexp(t, `(?m)^\s+context\.WithTimeout\s+s\.WithTimeout\s+ratio\s+winner$`, string(text))
	assert.Contains(t, string(text), "measured 400ms per run after 100ms warm-up, 2 rounds, alternating the order")
	assert.Contains(t, string(text), "\nverdict:\n  reverse proxy, s.WithTimeout against context.WithTimeout: CPU per request ")
	require.NotNil(t, env.Verdict)
	assert.Contains(t, env.Verdict.Winners, "cpu_per_request")
	assert.Contains(t, stderr.String(), "proxy: 4 phases, about ")
	assert.Contains(t, stderr.String(), "phase 4 of 4 (about ")
	assert.True(t, strings.Contains(stderr.String(), filepath.Join(dir, "proxy.txt")), "prints the paths it wrote")
}
