package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestABHarness: the A/B command's harness (ab/_harness, which the go
// command leaves out of ./...) builds against this checkout the way ab.sh
// builds it, in a module of its own that replaces the library by the
// tree, and its wtcancel workload, in a tiny window, prints one JSON line
// with every figure; table.py reads such lines. It does not run ab.sh,
// which builds a second tree and runs for minutes.
func TestABHarness(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	srcs, err := filepath.Glob(filepath.Join("ab", "_harness", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, srcs)
	for _, src := range append(srcs, filepath.Join(root, "go.sum")) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module abharness\n\ngo 1.26.0\n"), 0o644))
	bin := filepath.Join(dir, "harness")
	for _, args := range [][]string{
		{"mod", "edit", "-require=github.com/shardwheel/shardwheel@v0.0.0", "-replace=github.com/shardwheel/shardwheel=" + root},
		{"mod", "tidy"},
		{"build", "-o", bin, "."},
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "wtcancel", "-warmup", "10ms", "-window", "60ms", "-round", "1")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 1, "one JSON line: %q", stdout.String())
	var got struct {
		Workload string             `json:"workload"`
		Round    int                `json:"round"`
		Config   map[string]any     `json:"config"`
		Metrics  map[string]float64 `json:"metrics"`
		CPU      float64            `json:"cpu_s"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &got), lines[0])
	assert.Equal(t, "wtcancel", got.Workload)
	assert.Equal(t, 1, got.Round)
	assert.Equal(t, "60ms", got.Config["window"])
	assert.Positive(t, got.CPU)
	var want []string
	for _, parent := range []string{"Background", "WithCancel parent"} {
		want = append(want, parent+": s.WithTimeout+cancel ns/pair",
			parent+": context.WithTimeout+cancel ns/pair", parent+": s/context")
	}
	assert.ElementsMatch(t, want, slices.Collect(maps.Keys(got.Metrics)))
	for k, v := range got.Metrics {
		assert.Positive(t, v, k)
	}
	// The harness gives its figures in the order the table shows them.
	at := func(k string) int { return strings.Index(lines[0], `"`+k+`"`) }
	for i := 1; i < len(want); i++ {
		assert.Less(t, at(want[i-1]), at(want[i]), "%q before %q", want[i-1], want[i])
	}

	// table.py reads such lines, as ab.sh writes them, into a table.
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 is not on PATH: table.py not tried")
		return
	}
	var results bytes.Buffer
	for _, side := range []string{"old", "new"} {
		rec := map[string]any{"side": side, "round": 0, "workload": "wtcancel", "ok": true,
			"wall_s": 1.0, "host_busy_s": 0.5, "run": json.RawMessage(lines[0])}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		results.Write(append(b, '\n'))
	}
	path := filepath.Join(dir, "results.jsonl")
	require.NoError(t, os.WriteFile(path, results.Bytes(), 0o644))
	out, err := exec.Command(py, filepath.Join("ab", "table.py"), path, "OLD", "NEW").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Background: s.WithTimeout+cancel ns/pair")
	assert.Contains(t, string(out), "1.00x", "the same run on both sides")
}
