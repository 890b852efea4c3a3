package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
)

// status builds the progress line of a run from its workers' counters.
// enter is called by the run; line by the progress goroutine, then once
// more by the run when it stops it.
type status struct {
	impl   string
	target float64
	ops    func() opCounts
	late   func() hist.Snapshot

	mu    sync.Mutex
	phase string
	since time.Time
	span  time.Duration // phase length, 0 if open-ended
	final string        // the line to show once the run is over

	// Previous reading, for rates: line's caller only.
	prevAt    time.Time
	prevOps   opCounts
	prevPhase string
}

// newStatus returns the status of a run of impl, offered target
// requests/s, by workers ws.
func newStatus[H any](impl string, target float64, ws []*worker[H]) *status {
	return &status{
		impl:   impl,
		target: target,
		ops: func() opCounts {
			var c opCounts
			for _, w := range ws {
				c = c.add(w.n.read())
			}
			return c
		},
		late: func() hist.Snapshot {
			var s hist.Snapshot
			for _, w := range ws {
				s.Merge(w.peekLateness())
			}
			return s
		},
	}
}

// enter starts a phase of the run, of length span if known.
func (s *status) enter(phase string, span time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.since, s.span = phase, time.Now(), span
}

// finish replaces the status with a summary of r.
func (s *status) finish(r *Result) {
	line := fmt.Sprintf("%-14s not measured", r.Impl)
	if r.Measured > 0 {
		line = fmt.Sprintf("%-14s measured %s: %s req/s (%.0f%%), %s calls/s, %s cores",
			r.Impl, units.Duration(r.Measured), units.SI(r.AchievedRate), 100*r.AchievedRate/r.TargetRate,
			units.SI(r.OpsPerSec), units.Sig(r.CPU.Seconds()/r.Measured.Seconds()))
		// The load alone fires nothing: it has no lateness to show.
		if r.Lateness.Count > 0 {
			line += ", lateness p99 " + units.Duration(r.Lateness.P99)
		}
	}
	if r.Partial {
		line += " (interrupted)"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final = line
}

// line is the current status: the phase and its progress, then rates
// since the previous line, pending timers and lateness so far.
func (s *status) line() string {
	s.mu.Lock()
	phase, since, span, final := s.phase, s.since, s.span, s.final
	s.mu.Unlock()
	if final != "" {
		return final
	}
	now := time.Now()
	ops := s.ops()
	line := fmt.Sprintf("%-14s %-7s %5.1fs", s.impl, phase, now.Sub(since).Seconds())
	if span > 0 {
		line += fmt.Sprintf("/%v", span)
	}
	// Most telling first, as a narrow terminal cuts the end.
	loading := func(phase string) bool { return phase == "warm-up" || phase == "measure" }
	secs := now.Sub(s.prevAt).Seconds()
	rated := loading(phase) && loading(s.prevPhase) && secs > 0
	d := ops.sub(s.prevOps)
	if rated {
		line += fmt.Sprintf("  %s req/s (%.0f%%)", units.SI(float64(d.Requests)/secs), 100*float64(d.Requests)/secs/s.target)
	}
	line += fmt.Sprintf("  %s pending", units.SI(float64(ops.pending())))
	if l := s.late(); l.Count() > 0 {
		line += fmt.Sprintf("  lateness p99 %s", units.Duration(time.Duration(l.Quantile(0.99))))
	}
	if rated {
		line += fmt.Sprintf("  %s calls/s  %s fired/s", units.SI(float64(d.calls())/secs), units.SI(float64(d.Fired)/secs))
	}
	s.prevAt, s.prevOps, s.prevPhase = now, ops, phase
	return line
}
