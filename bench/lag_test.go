package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLagWritesFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lag")
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(tinyArgs("lag", "-out", dir), &stdout, &stderr), stderr.String())
	for _, f := range []string{"report.html", "report.txt", "report.json", "fgprof.pprof", "lag.txt", "lag.json"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	out := stdout.String()
	assert.Contains(t, out, filepath.Join(dir, "report.html"))
	assert.Contains(t, out, filepath.Join(dir, "fgprof.pprof"))
	assert.NoFileExists(t, filepath.Join(dir, "trace.out"), "an execution trace only with -trace")
	assert.Contains(t, out, "tick lag p50/p99/p99.9/max")
	// The diagnosis looks past p99, and names the time and cause of
	// any spike.
	assert.Contains(t, out, "\ndiagnosis\n")
	assert.Regexp(t, `\n  - (ok: |timers ran late: |the tail ran late: |a few timers ran late: )lateness p99 \S+,? (p99.9 \S+ )?`, out)
	assert.Regexp(t, `(p99.9 \S+ and max \S+|p99.9 is \S+ and max \S+|but max is \S+)`, out)
	if strings.Contains(out, "were spikes") {
		assert.Regexp(t, `\n  - at \S+-\S+ into the capture: \S+ lost above the limit; lateness max \S+ \(p99 \S+\), `+
			`tick lag max \S+ \(p99 \S+\), longest pass \S+; `, out)
	}
	assert.Contains(t, stderr.String(), "results written to "+filepath.Join(dir, "lag.txt")+" and "+filepath.Join(dir, "lag.json")+"\n")

	stdout.Reset()
	require.Equal(t, exitOK, run(tinyArgs("lag", "-out", dir, "-json", "-duration", "300ms", "-trace"), &stdout, &stderr), stderr.String())
	// The envelope, its results as the package documentation has them,
	// and lag's former top-level keys beside it.
	env := decodeEnvelope[lagConfig, map[string]json.RawMessage](t, stdout.Bytes(), "load", "result", "diagnosis", "files")
	assert.Nil(t, env.Verdict)
	var results []string
	for k := range env.Results {
		results = append(results, k)
	}
	assert.ElementsMatch(t, []string{"result", "diagnosis", "files"}, results)
	var l LagRun
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &l), stdout.String())
	require.NotNil(t, l.Files)
	assert.Equal(t, filepath.Join(dir, "report.html"), l.Files.HTML)
	assert.Equal(t, filepath.Join(dir, "trace.out"), l.Files.Trace)
	assert.FileExists(t, l.Files.Trace)
	require.NotNil(t, l.Result)
	assert.NotNil(t, l.Result.TickLag)
	require.NotEmpty(t, l.Diagnosis)
	assert.Contains(t, l.Diagnosis[0], "lateness p99")
	report, err := os.ReadFile(l.Files.Text)
	require.NoError(t, err)
	for _, d := range l.Diagnosis {
		assert.Contains(t, string(report), strings.TrimPrefix(d, "spike "), "lag.json's diagnosis is report.txt's")
	}
}

func TestLagInterruptedMidRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lag")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- runContext(ctx, tinyArgs("lag", "-out", dir, "-duration", "30s", "-json"), &stdout, &stderr)
	}()
	// Cancelled as soon as the measured window has begun: what was
	// measured until then, however little, is reported.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "measure") }, 20*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("lag did not stop after cancel")
	}
	var l LagRun
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &l), stdout.String())
	assert.True(t, l.Interrupted)
	require.NotNil(t, l.Result)
	assert.True(t, l.Result.Partial)
	require.NotNil(t, l.Files, "the capture still writes its files")
	assert.FileExists(t, l.Files.HTML)
	assert.FileExists(t, l.Files.Profile)
}

// TestLagTextOneShard: the header's shard count agrees with its noun.
func TestLagTextOneShard(t *testing.T) {
	l := &LagRun{Host: host(), Load: defaultLoad(),
		Result: &Result{Impl: nameWheel, Shards: 1, Tick: time.Millisecond, Measured: time.Second, TargetRate: 1}}
	var b bytes.Buffer
	require.NoError(t, l.writeText(&b))
	assert.Contains(t, b.String(), "; shardwheel: 1 shard, tick 1ms\n")
	l.Result.Shards = 2
	b.Reset()
	require.NoError(t, l.writeText(&b))
	assert.Contains(t, b.String(), "; shardwheel: 2 shards, tick 1ms\n")
}

// TestLagDisturb: -disturb injects its disturbances into the measured
// window, spread evenly, and the report lists them with their times;
// -serve shows the live page meanwhile and says where.
func TestLagDisturb(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lag")
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(tinyArgs("lag", "-out", dir, "-disturb", "sleep,hog", "-serve", "127.0.0.1:0", "-json"), &stdout, &stderr),
		stderr.String())
	assert.Regexp(t, `the live page, during the measured window: http://127\.0\.0\.1:\d+/`, stderr.String())
	var l LagRun
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &l), stdout.String())
	require.Len(t, l.Disturbances, 2)
	assert.Equal(t, Disturbance{Kind: "sleep", At: time.Second / 3, For: blockFor}, l.Disturbances[0])
	assert.Equal(t, Disturbance{Kind: "hog", At: 2 * time.Second / 3, For: time.Second / 6}, l.Disturbances[1])
	text, err := os.ReadFile(filepath.Join(dir, "lag.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(text), "disturbances injected (-disturb), to hold the diagnosis against:\n"+
		"  - sleep at 333ms-383ms into the capture: a task sleeps 50ms on its shard\n")
	assert.Contains(t, string(text), "  - hog at 667ms-833ms into the capture: ")
}

// TestParseDisturb takes the three kinds, in any order, and names a bad
// one.
func TestParseDisturb(t *testing.T) {
	kinds, err := parseDisturb("gc, sleep,hog")
	require.NoError(t, err)
	assert.Equal(t, []string{"gc", "sleep", "hog"}, kinds)
	_, err = parseDisturb("sleep,nap")
	assert.EqualError(t, err, `"nap" is not sleep, hog or gc`)
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, run([]string{"lag", "-disturb", "nap"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "nap")
}
