package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyArgs returns cmd's arguments for a load small enough for tests,
// even under the race detector: delays short enough that timers fire
// within the one-second window.
func tinyArgs(cmd string, extra ...string) []string {
	args := []string{cmd,
		"-rate", "2000", "-resident", "4000", "-cancel", "0.9",
		"-delay-min", "50ms", "-delay-max", "400ms", "-resp-min", "1ms", "-resp-max", "20ms",
		"-conns", "200", "-idle", "300ms", "-reset-rate", "1000",
		"-warmup", "200ms", "-duration", "1s", "-shards", "2", "-workers", "2",
	}
	if cmd == "compare" {
		args = append(args, "-churn-rounds", "0") // tinyChurn tests the churn section
	}
	return append(args, extra...)
}

// tinyChurn returns flags of a churn load small enough for tests, even
// under the race detector, with prefix "" for churn and "churn-" for
// compare's section: a cancel ring short enough that every goroutine
// fills it during the warm-up, even on a busy host (a ring of 1024 once
// did not fill in 600ms, under -race beside two CPU hogs, and the run
// failed: no cancel in its window).
func tinyChurn(prefix string) []string {
	return []string{"-" + prefix + "goroutines", "1,2", "-" + prefix + "rounds", "1", "-" + prefix + "resident", "2000",
		"-" + prefix + "cancel-after", "64", "-" + prefix + "warmup", "300ms", "-" + prefix + "duration", "300ms"}
}

// testEnvelope is the JSON document every command writes, with its
// config and results decoded as C and R.
type testEnvelope[C, R any] struct {
	Command     string        `json:"command"`
	Host        Host          `json:"host"`
	Started     time.Time     `json:"started"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Config      C             `json:"config"`
	Results     R             `json:"results"`
	Verdict     *Verdict      `json:"verdict"`
	Interrupted bool          `json:"interrupted"`
}

// decodeEnvelope decodes b, which must be one envelope whose top-level
// keys are exactly the envelope's (plus extra).
func decodeEnvelope[C, R any](t *testing.T, b []byte, extra ...string) testEnvelope[C, R] {
	t.Helper()
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &raw), "stdout must be one JSON document: %s", b)
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	want := append([]string{"command", "host", "started", "elapsed_ns", "config", "results", "verdict", "interrupted"}, extra...)
	assert.ElementsMatch(t, want, keys, "the envelope's keys")
	var e testEnvelope[C, R]
	require.NoError(t, json.Unmarshal(b, &e))
	assert.NotEmpty(t, e.Host.OS)
	assert.False(t, e.Started.IsZero())
	assert.Positive(t, e.Elapsed)
	return e
}

// syncBuffer is a bytes.Buffer that a test may read while a run writes
// progress to it from another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// interruptAt runs the command args and cancels it once its progress has
// said phase (as the first SIGINT does), and checks that it stopped as an
// interruption: exit 130 and the partial-results notice. It returns what
// the command printed.
func interruptAt(t *testing.T, args []string, phase string) (stdout []byte, stderr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	var errs syncBuffer
	done := make(chan int)
	go func() { done <- runContext(ctx, args, &out, &errs) }()
	require.Eventually(t, func() bool { return strings.Contains(errs.String(), phase) }, 20*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code, errs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not stop after cancel", args[0])
	}
	assert.Contains(t, errs.String(), "bench: interrupted; the results above are partial\n")
	return out.Bytes(), errs.String()
}
