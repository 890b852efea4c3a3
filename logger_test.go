package shardwheel_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// syncBuffer is a bytes.Buffer that shard goroutines may write while the
// test reads it.
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

// TestWithLoggerTakesThePanicLog: a task's panic goes to the WithLogger
// logger, with its value and stack, and not to slog.Default().
func TestWithLoggerTakesThePanicLog(t *testing.T) {
	var mine, def syncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithLogger(slog.New(slog.NewTextHandler(&mine, nil))))
	_, err := s.AfterFunc(0, func() { panic("boom") })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(mine.String(), "task panicked") }, waitFor, pollEvery)
	assert.Contains(t, mine.String(), "panic=boom")
	assert.Contains(t, mine.String(), "stack=")
	assert.Empty(t, def.String(), "nothing reaches the default logger")
}

// TestNilLoggerIsTheDefault: WithLogger(nil) logs to slog.Default(), read
// when the message is written.
func TestNilLoggerIsTheDefault(t *testing.T) {
	var def syncBuffer
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithLogger(nil))
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	_, err := s.AfterFunc(time.Millisecond, func() { panic("late default") })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(def.String(), "late default") }, waitFor, pollEvery)
}
