package profiling_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// reportJSON is the part of report.json the tests read.
type reportJSON struct {
	Interrupted bool `json:"interrupted"`
	ShardCount  int  `json:"shard_count"`
	Samples     []struct {
		AtNs        int64   `json:"at_ns"`
		FiredPerSec float64 `json:"fired_per_sec"`
		Lateness    struct {
			P99   int64  `json:"p99_ns"`
			Count uint64 `json:"count"`
		} `json:"lateness"`
	} `json:"samples"`
	Total struct {
		Fired uint64 `json:"fired"`
	} `json:"total"`
	PerShard  []json.RawMessage `json:"per_shard"`
	Diagnosis []string          `json:"diagnosis"`
	Spikes    []struct {
		FromNs int64    `json:"from_ns"`
		ToNs   int64    `json:"to_ns"`
		Causes []string `json:"causes"`
		Text   string   `json:"text"`
	} `json:"spikes"`
}

// readReport checks that Capture wrote all four files and returns the HTML
// page and the decoded report.json.
func readReport(t *testing.T, rep *profiling.Report) (html string, js reportJSON) {
	t.Helper()
	require.NotNil(t, rep)
	files := map[string]string{
		"report.txt": rep.TextPath, "report.html": rep.HTMLPath,
		"report.json": rep.JSONPath, "fgprof.pprof": rep.ProfilePath,
	}
	for name, path := range files {
		assert.Equal(t, filepath.Join(rep.Dir, name), path)
		fi, err := os.Stat(path)
		require.NoError(t, err, name)
		assert.NotZero(t, fi.Size(), name)
	}
	text, err := os.ReadFile(rep.TextPath)
	require.NoError(t, err)
	assert.Equal(t, rep.Summary, string(text))

	b, err := os.ReadFile(rep.JSONPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &js))

	b, err = os.ReadFile(rep.HTMLPath)
	require.NoError(t, err)
	html = string(b)
	requireWellFormed(t, html) // the page is XHTML-clean, not just its plots
	assert.Equal(t, 8, requireDrawable(t, html), "plots")
	assert.Equal(t, rep.Diagnosis, js.Diagnosis)
	assert.NotNil(t, js.Spikes)
	for _, sp := range js.Spikes {
		assert.Less(t, sp.FromNs, sp.ToNs)
		assert.NotEmpty(t, sp.Causes)
		assert.NotEmpty(t, sp.Text)
	}
	for _, l := range rep.Diagnosis {
		assert.Contains(t, rep.Summary, "  - "+strings.TrimPrefix(l, "spike ")+"\n", "the diagnosis ends the summary")
	}

	f, err := os.Open(rep.ProfilePath)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	assert.NotEmpty(t, p.Sample, "fgprof samples")
	return html, js
}

// load schedules short timers on s from a goroutine until stop is called.
func load(s *shardwheel.Scheduler) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			_, _ = s.AfterFunc(time.Duration(rand.IntN(20))*time.Millisecond, func() {})
			if i%25 == 0 {
				time.Sleep(time.Millisecond) // a few thousand timers per second
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func TestCapture(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	stop := load(s)
	defer stop()

	rep, err := profiling.Capture(context.Background(), s, profiling.CaptureConfig{
		Duration: time.Second,
		Interval: 100 * time.Millisecond,
		Dir:      filepath.Join(t.TempDir(), "new", "dir"),
	})
	require.NoError(t, err)
	html, js := readReport(t, rep)

	assert.False(t, js.Interrupted)
	assert.Equal(t, 2, js.ShardCount)
	assert.Len(t, js.PerShard, 2)
	require.GreaterOrEqual(t, len(js.Samples), 5)
	assert.LessOrEqual(t, len(js.Samples), 10, "at most one sample per interval")
	var fired float64
	for i, smp := range js.Samples {
		if i > 0 {
			assert.Greater(t, smp.AtNs, js.Samples[i-1].AtNs)
		}
		fired += smp.FiredPerSec
	}
	assert.Positive(t, fired)
	assert.Positive(t, js.Total.Fired)

	for _, want := range []string{"2 shards", "tick 1ms", "lateness", "tick lag", "task time", "p99.9", "diagnosis"} {
		assert.Contains(t, rep.Summary, want)
	}
	for _, want := range []string{"Tick lag", "Timer lateness", "Pass time", "Task time", "Latency distribution", "Throughput", "fired/s", "scheduled/s", "Pending timers", "Queued new timers", "p99.9", "other processes kept"} {
		assert.Contains(t, html, want)
	}
	require.NotEmpty(t, rep.Diagnosis)
	for _, re := range []string{`lateness p99 \d`, `p99\.9 (is )?\d`, `max (is )?\d`} {
		assert.Regexp(t, re, rep.Diagnosis[0], "the lateness finding covers the tail")
	}

	// Every chart has data, axes with units, and labels clear of each
	// other and of the data; the charts over time draw p50, p99 and max,
	// and name their reference lines in the legend.
	for _, b := range charts(html) {
		c := requireReadable(t, b, true)
		var legend, notes []string
		for _, tx := range c.texts {
			switch tx.class {
			case "legend":
				legend = append(legend, tx.s)
			case "note":
				notes = append(notes, tx.s)
			}
		}
		named := func(ref string) bool {
			return slices.Contains(legend, ref) || slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, ref+" is above") })
		}
		switch c.title {
		case "Tick lag", "Timer lateness":
			assert.Subset(t, legend, []string{"p50", "p99", "max"}, c.title)
			assert.True(t, named("tick + 1ms slack (2ms)"), "%s: %v %v", c.title, legend, notes)
			assert.True(t, named("incident (22ms)"), "%s: %v %v", c.title, legend, notes)
			assert.Equal(t, 3, c.lines, c.title)
		case "Pass time":
			assert.Subset(t, legend, []string{"p50", "p99", "max"}, c.title)
			assert.True(t, named("1 tick (1ms)"), "%s: %v %v", c.title, legend, notes)
			assert.Equal(t, 3, c.lines, c.title)
		}
	}
}

// Cancelling the context ends the capture early with ctx's error, and the
// files cover what was captured.
func TestCaptureCancelled(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	stop := load(s)
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := profiling.Capture(ctx, s, profiling.CaptureConfig{Duration: time.Minute, Interval: 50 * time.Millisecond, Dir: t.TempDir()})
	// It ends with ctx, not after the minute asked (the bound leaves a
	// busy host room).
	assert.Less(t, time.Since(start), 30*time.Second, "the capture ran on after ctx ended")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "profiling: capture interrupted after")

	_, js := readReport(t, rep)
	assert.True(t, js.Interrupted)
	assert.NotEmpty(t, js.Samples)
	assert.Contains(t, rep.Summary, "Interrupted after")
}

// A capture without samples, or of an idle scheduler whose series are all
// zero, still draws every plot, with no NaN or Inf.
func TestCaptureEmpty(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx     context.Context
		samples int // at most: a late interval merges into the next
	}{
		"no samples": {cancelled, 0},
		"idle":       {context.Background(), 3},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScheduler(t, shardwheel.WithShards(2))
			rep, err := profiling.Capture(c.ctx, s, profiling.CaptureConfig{
				Duration: 60 * time.Millisecond, Interval: 20 * time.Millisecond, Dir: t.TempDir(),
			})
			if c.ctx.Err() != nil {
				require.ErrorIs(t, err, context.Canceled)
			} else {
				require.NoError(t, err)
			}
			html, js := readReport(t, rep)
			assert.LessOrEqual(t, len(js.Samples), c.samples)
			if c.samples > 0 {
				assert.NotEmpty(t, js.Samples)
			}
			assert.Contains(t, rep.Summary, "no timer fired")
			if c.samples == 0 {
				assert.Contains(t, html, "no samples")
			}
		})
	}
}

func TestCaptureConfigValidation(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1))
	dir := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		cfg  profiling.CaptureConfig
		want string
	}{
		{profiling.CaptureConfig{Dir: dir},
			"profiling: CaptureConfig.Duration must be > 0, got 0s"},
		{profiling.CaptureConfig{Duration: -time.Second, Dir: dir},
			"profiling: CaptureConfig.Duration must be > 0, got -1s"},
		{profiling.CaptureConfig{Duration: time.Second, Interval: -time.Millisecond, Dir: dir},
			"profiling: CaptureConfig.Interval must be 0 (for 250ms) or at least 10ms, got -1ms"},
		{profiling.CaptureConfig{Duration: time.Second, Interval: time.Millisecond, Dir: dir},
			"profiling: CaptureConfig.Interval must be 0 (for 250ms) or at least 10ms, got 1ms"},
		{profiling.CaptureConfig{Duration: time.Second},
			`profiling: CaptureConfig.Dir must not be empty, got ""`},
	} {
		rep, err := profiling.Capture(context.Background(), s, c.cfg)
		assert.EqualError(t, err, c.want)
		assert.Nil(t, rep)
	}
	assert.NoDirExists(t, dir, "nothing is written for an invalid config")

	_, err := profiling.Capture(context.Background(), nil, profiling.CaptureConfig{Duration: time.Second, Dir: dir})
	assert.EqualError(t, err, "profiling: Capture: nil Scheduler")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = profiling.Capture(context.Background(), s, profiling.CaptureConfig{Duration: time.Second, Dir: filepath.Join(file, "sub")})
	assert.ErrorContains(t, err, "profiling: ")
	assert.True(t, strings.Contains(err.Error(), "not a directory"), err.Error())
}

// TestCaptureTrace: with Trace, Capture writes an execution trace in which
// the shards' passes are regions (the trace holds each string it names
// verbatim, so the region type and log fields are found in its bytes);
// when a trace is running already, Capture says so and writes the rest of
// its report. Not parallel: a program runs one execution trace at a time.
func TestCaptureTrace(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	stop := load(s)
	defer stop()
	cfg := profiling.CaptureConfig{Duration: 300 * time.Millisecond, Interval: 50 * time.Millisecond, Dir: t.TempDir(), Trace: true}

	rep, err := profiling.Capture(context.Background(), s, cfg)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cfg.Dir, "trace.out"), rep.TracePath)
	b, err := os.ReadFile(rep.TracePath)
	require.NoError(t, err)
	for _, want := range []string{"shardwheel.pass", "shardwheel.shard", "shardwheel.work", "taken_in=", "fired="} {
		assert.True(t, bytes.Contains(b, []byte(want)), "%q not in the trace (%d bytes)", want, len(b))
	}

	require.NoError(t, trace.Start(io.Discard))
	cfg.Dir = t.TempDir()
	rep, err = profiling.Capture(context.Background(), s, cfg)
	trace.Stop()
	require.ErrorContains(t, err, "profiling: execution trace:")
	require.NotNil(t, rep)
	assert.Empty(t, rep.TracePath)
	assert.NoFileExists(t, filepath.Join(cfg.Dir, "trace.out"))
	assert.FileExists(t, rep.HTMLPath)
	assert.Contains(t, rep.Summary, "tick lag")
}
