package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

func TestParseArgsDefaults(t *testing.T) {
	for _, args := range [][]string{nil, {"compare"}} {
		o, err := parseArgs(args)
		require.NoError(t, err)
		assert.Equal(t, "compare", o.cmd)
		want := defaultLoad()
		want.Workers = o.load.Workers
		assert.Equal(t, want, o.load)
		assert.Positive(t, o.shards)
		assert.Equal(t, shardwheel.DefaultTick, o.tick, "the library's default")
	}
}

func TestParseArgsFlags(t *testing.T) {
	o, err := parseArgs([]string{"--rate", "1000", "-cancel=0.5", "-delay-min", "2s", "-delay-max", "2s", "-json", "-out", "x", "-gomaxprocs", "3"})
	require.NoError(t, err)
	assert.Equal(t, "compare", o.cmd, "flags without a command mean compare")
	assert.Equal(t, 1000.0, o.load.Rate)
	assert.Equal(t, 0.5, o.load.Cancel)
	assert.Equal(t, 2*time.Second, o.load.DelayMax)
	assert.True(t, o.json)
	assert.Equal(t, "x", o.out)
	assert.Equal(t, 3, o.shards, "shards follow -gomaxprocs unless set")
	assert.Equal(t, 3, o.load.Workers, "workers follow -gomaxprocs unless set")

	o, err = parseArgs([]string{"-gomaxprocs", "3", "-shards", "5"})
	require.NoError(t, err)
	assert.Equal(t, 5, o.shards)
}

func TestParseArgsTune(t *testing.T) {
	o, err := parseArgs([]string{"tune", "-shards", "4,1,4", "-ticks", "5ms,1ms", "-lag-p99", "3ms"})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 4}, o.shardList, "sorted, duplicates dropped")
	assert.Equal(t, []time.Duration{time.Millisecond, 5 * time.Millisecond}, o.tickList)
	assert.Equal(t, 3*time.Millisecond, o.lagP99)
	assert.Equal(t, 3*time.Second, o.load.Duration, "tune measures shorter runs")

	o, err = parseArgs([]string{"tune"})
	require.NoError(t, err)
	assert.NotEmpty(t, o.shardList)
	assert.Equal(t, 1, o.shardList[0])
	assert.Len(t, o.tickList, 4)
}

func TestParseArgsLagDefaultOut(t *testing.T) {
	o, err := parseArgs([]string{"lag"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(o.out, "bench/out/lag-"), o.out)
}

func TestParseArgsBad(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error: the flag and the value
	}{
		{[]string{"-rate", "0"}, "invalid value 0 for -rate"},
		{[]string{"-rate", "-5"}, "invalid value -5 for -rate"},
		{[]string{"-rate", "NaN"}, "invalid value NaN for -rate"},
		{[]string{"-rate", "+Inf"}, "invalid value +Inf for -rate"},
		{[]string{"-rate", "fast"}, `invalid value "fast" for -rate: not a number`},
		{[]string{"-duration", "5"}, `invalid value "5" for -duration: missing unit; use e.g. 5s or 5ms`},
		{[]string{"-duration", "soon"}, `invalid value "soon" for -duration: not a duration; use e.g. 500ms, 5s or 1m30s`},
		{[]string{"-conns", "1.5"}, `invalid value "1.5" for -conns: not an integer`},
		{[]string{"-seed", "-1"}, `invalid value "-1" for -seed: not a non-negative integer`},
		{[]string{"-conns", "99999999999999999999"}, `invalid value "99999999999999999999" for -conns: out of range`},
		{[]string{"proxy", "-warmup", "1"}, `invalid value "1" for -warmup: missing unit; use e.g. 1s or 1ms`},
		{[]string{"-resident", "-1"}, "invalid value -1 for -resident"},
		{[]string{"-cancel", "1.5"}, "invalid value 1.5 for -cancel"},
		{[]string{"-cancel", "-0.1"}, "invalid value -0.1 for -cancel"},
		{[]string{"-delay-min", "-1s"}, "invalid value -1s for -delay-min"},
		{[]string{"-delay-min", "5s", "-delay-max", "1s"}, "invalid value 1s for -delay-max"},
		{[]string{"-resp-min", "0s"}, "invalid value 0s for -resp-min"},
		{[]string{"-resp-min", "50ms", "-resp-max", "10ms"}, "invalid value 10ms for -resp-max"},
		{[]string{"-resp-max", "2m"}, "invalid value 2m0s for -resp-max"},
		{[]string{"-conns", "-3"}, "invalid value -3 for -conns"},
		{[]string{"-idle", "-1s"}, "invalid value -1s for -idle"},
		{[]string{"-reset-rate", "-1"}, "invalid value -1 for -reset-rate"},
		{[]string{"-reset-rate", "1e9"}, "invalid value 1e+09 for -reset-rate"},
		{[]string{"-warmup", "-1s"}, "invalid value -1s for -warmup"},
		{[]string{"-duration", "0s"}, "invalid value 0s for -duration"},
		{[]string{"-duration", "-2s"}, "invalid value -2s for -duration"},
		{[]string{"-workers", "0"}, "invalid value 0 for -workers"},
		{[]string{"-gomaxprocs", "-1"}, "invalid value -1 for -gomaxprocs"},
		{[]string{"-shards", "0"}, "invalid value 0 for -shards"},
		{[]string{"-shards", "5000"}, "invalid value 5000 for -shards"},
		{[]string{"-tick", "500us"}, "invalid value 500µs for -tick"},
		{[]string{"lag", "-tick", "0s"}, "invalid value 0s for -tick"},
		{[]string{"tune", "-shards", "0,2"}, "invalid value 0 for -shards"},
		{[]string{"tune", "-shards", "x"}, `invalid value "x" for flag -shards`},
		{[]string{"tune", "-ticks", "1ms,100us"}, "invalid value 100µs for -ticks"},
		{[]string{"tune", "-lag-p99", "0s"}, "invalid value 0s for -lag-p99"},
		{[]string{"tune", "-lateness-p99", "-1ms"}, "invalid value -1ms for -lateness-p99"},
		{[]string{"proxy", "-clients", "0"}, "invalid value 0 for -clients"},
		{[]string{"proxy", "-slow", "1.5"}, "invalid value 1.5 for -slow"},
		{[]string{"proxy", "-slow-for", "0s"}, "invalid value 0s for -slow-for"},
		{[]string{"proxy", "-timeout", "-1s"}, "invalid value -1s for -timeout"},
		{[]string{"proxy", "-warmup", "-1s"}, "invalid value -1s for -warmup"},
		{[]string{"proxy", "-duration", "0s"}, "invalid value 0s for -duration"},
		{[]string{"proxy", "-rounds", "0"}, "invalid value 0 for -rounds"},
		{[]string{"proxy", "-tick", "0s"}, "invalid value 0s for -tick"},
		{[]string{"proxy", "-rate", "5"}, "flag provided but not defined: -rate"},
		{[]string{"tune", "-repeats", "0"}, "invalid value 0 for -repeats"},
		{[]string{"burst", "-timers", "0"}, "invalid value 0 for -timers"},
		{[]string{"burst", "-producers", "0"}, "invalid value 0 for -producers"},
		{[]string{"burst", "-spread", "-1s"}, "invalid value -1s for -spread"},
		{[]string{"burst", "-delay-min", "-1ms"}, "invalid value -1ms for -delay-min"},
		{[]string{"burst", "-runs", "0"}, "invalid value 0 for -runs"},
		{[]string{"burst", "-tick", "10us"}, "invalid value 10µs for -tick"},
		{[]string{"burst", "-rate", "5"}, "flag provided but not defined: -rate"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"compare", "-ticks", "1ms"}, "flag provided but not defined: -ticks"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"compare", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseArgs(tt.args)
			var ue usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A bad command line gets one line naming the problem and where to read
// more, and exit status 2; the full usage is for -h alone.
func TestRunUsageErrorIsOneLine(t *testing.T) {
	const (
		list  = "; run 'go run ./bench -h' for the list"
		usage = "; run 'go run ./bench %s -h' for usage"
	)
	tests := []struct {
		args []string
		want string // stderr, without the newline
	}{
		{[]string{"nosuch"}, `bench: unknown command "nosuch"` + list},
		{[]string{"nosuch", "-rate", "0"}, `bench: unknown command "nosuch"` + list},
		{[]string{"-rate", "0"}, "bench: invalid value 0 for -rate: must be > 0" + fmt.Sprintf(usage, "compare")},
		{[]string{"-rate", "fast"}, `bench: invalid value "fast" for -rate: not a number` + fmt.Sprintf(usage, "compare")},
		{[]string{"-duration", "5"}, `bench: invalid value "5" for -duration: missing unit; use e.g. 5s or 5ms` + fmt.Sprintf(usage, "compare")},
		{[]string{"-unknown"}, "bench: flag provided but not defined: -unknown" + fmt.Sprintf(usage, "compare")},
		{[]string{"compare", "extra"}, `bench: unexpected argument "extra"` + fmt.Sprintf(usage, "compare")},
		{[]string{"tune", "-cancel", "2"}, "bench: invalid value 2 for -cancel: must be in [0,1]" + fmt.Sprintf(usage, "tune")},
		{[]string{"tune", "-ticks", "1ms,x"}, `bench: invalid value "1ms,x" for flag -ticks: time: invalid duration "x"` + fmt.Sprintf(usage, "tune")},
		{[]string{"lag", "-tick", "0s"}, "bench: invalid value 0s for -tick: " + tickRule + fmt.Sprintf(usage, "lag")},
		{[]string{"proxy", "-clients", "0"}, "bench: invalid value 0 for -clients: must be in [1, 10000]" + fmt.Sprintf(usage, "proxy")},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, exitUsage, run(tt.args, &stdout, &stderr))
			assert.Empty(t, stdout.String())
			assert.Equal(t, tt.want+"\n", stderr.String())
		})
	}
}

// An -out that cannot be written fails at once, in one line, before any
// load runs (no progress), rather than after the whole run.
func TestRunUnwritableOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file") // a file where -out needs a directory
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	taken := filepath.Join(dir, "taken") // a directory where a result file goes
	require.NoError(t, os.MkdirAll(filepath.Join(taken, "compare.txt"), 0o755))
	tests := []struct {
		cmd, out, want string
	}{
		{"compare", filepath.Join(file, "out"), file},
		{"tune", filepath.Join(file, "out"), file},
		{"lag", filepath.Join(file, "out"), file},
		{"lag", file, file},
		{"compare", taken, filepath.Join(taken, "compare.txt")},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+" "+tt.out, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, exitError, run(tinyArgs(tt.cmd, "-out", tt.out), &stdout, &stderr))
			assert.Empty(t, stdout.String(), "no report")
			line, rest, _ := strings.Cut(stderr.String(), "\n")
			assert.Empty(t, rest, "one line, no progress")
			assert.True(t, strings.HasPrefix(line, "bench: cannot write results: "), line)
			assert.Contains(t, line, tt.want)
		})
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"tune", "-help"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitOK, run(args, &stdout, &stderr), args)
		assert.Contains(t, stdout.String(), "usage: go run ./bench")
	}
	var stdout bytes.Buffer
	run([]string{"tune", "-h"}, &stdout, &bytes.Buffer{})
	assert.Contains(t, stdout.String(), "-lag-p99")
	// The default shown is the list used, without repeats.
	o, err := parseArgs([]string{"tune"})
	require.NoError(t, err)
	assert.Contains(t, stdout.String(), "(default "+joinList(o.shardList)+": 1, NumCPU/2, NumCPU, 2*NumCPU, without repeats)")
	assert.NotContains(t, stdout.String(), "default 1,1,")

	// Every command's help lists it, and its flags.
	for _, cmd := range commands {
		stdout.Reset()
		require.Equal(t, exitOK, run([]string{cmd, "-h"}, &stdout, &bytes.Buffer{}))
		assert.Contains(t, stdout.String(), "\n  "+cmd+" ", cmd)
		assert.Contains(t, stdout.String(), "Flags of "+cmd+":", cmd)
	}
	stdout.Reset()
	run([]string{"churn", "-h"}, &stdout, &bytes.Buffer{})
	assert.Contains(t, stdout.String(), "-goroutines")
	assert.Contains(t, stdout.String(), "the larger of a quarter of a core and a tenth of the host's CPUs", "-wait-quiet says what it waits for")
	// tune and lag run shardwheel alone: their help speaks of it alone.
	for _, cmd := range []string{"tune", "lag"} {
		stdout.Reset()
		run([]string{cmd, "-h"}, &stdout, &bytes.Buffer{})
		_, flags, ok := strings.Cut(stdout.String(), "Flags of "+cmd+":")
		require.True(t, ok, cmd)
		assert.Contains(t, flags, "-keyed", cmd)
		assert.Contains(t, flags, "Index (AfterFunc/Cancel/Reset)", cmd)
		assert.NotContains(t, flags, "time.AfterFunc", cmd)
		assert.NotContains(t, flags, "both implementations", cmd)
	}
	stdout.Reset()
	run([]string{"compare", "-h"}, &stdout, &bytes.Buffer{})
	assert.Contains(t, stdout.String(), "-churn-rounds")
	assert.Contains(t, stdout.String(), "time.AfterFunc through a sync.Map of timers")
	assert.Contains(t, stdout.String(), "both implementations get the same one")
}

func TestRunHelpIsNotAnError(t *testing.T) {
	_, err := parseArgs([]string{"-h"})
	assert.True(t, errors.Is(err, flag.ErrHelp))
}

func TestRunCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := runContext(ctx, tinyArgs("compare"), &stdout, &stderr)
	assert.Equal(t, exitInterrupted, code)
	assert.Contains(t, stdout.String(), "INTERRUPTED")
}

// TestAffinityFlag: -affinity reaches the Scheduler options of every
// command that runs one, and the headers say so.
func TestAffinityFlag(t *testing.T) {
	for _, cmd := range []string{"compare", "lag", "burst", "proxy", "churn"} {
		o, err := parseArgs([]string{cmd, "-affinity"})
		require.NoError(t, err, cmd)
		assert.True(t, o.affinity, cmd)
		o, err = parseArgs([]string{cmd})
		require.NoError(t, err, cmd)
		assert.False(t, o.affinity, "%s: off by default", cmd)
	}
	assert.Len(t, wheelOptions(2, time.Millisecond, true), 3)
	assert.Equal(t, ", affinity on", affinityNote(true))
	assert.Empty(t, affinityNote(false))
}
