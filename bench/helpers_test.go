package main

import (
	"bytes"
	"sync"
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
	return append(args, extra...)
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
