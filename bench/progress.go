package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows what a run is doing while it runs: on a terminal, one
// status line rewritten in place; otherwise a plain line now and then, so
// that logs stay readable.
type progress struct {
	w     io.Writer
	tty   bool
	width int // of the terminal; 0 if unknown
	every time.Duration
}

// newProgress returns a progress display on w, in place if w is a
// terminal.
func newProgress(w io.Writer) *progress {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return &progress{w: w, tty: true, width: termWidth(f), every: 250 * time.Millisecond}
	}
	return &progress{w: w, every: 5 * time.Second}
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// start shows status() every p.every, and at once when kick is called,
// until stop is called, which shows it a last time as a line of its own.
func (p *progress) start(status func() string) (kick, stop func()) {
	done := make(chan struct{})
	kicks := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			case <-kicks:
			}
			p.show(status(), false)
		}
	})
	kick = func() {
		select {
		case kicks <- struct{}{}:
		default: // a kick is pending already
		}
	}
	return kick, sync.OnceFunc(func() {
		close(done)
		wg.Wait()
		p.show(status(), true)
	})
}

// show displays one status; last keeps it on screen as a line of its own.
func (p *progress) show(s string, last bool) {
	// A line longer than the terminal wraps, and \r then rewrites only
	// its last part: cut it to fit.
	if r := []rune(s); p.tty && p.width > 1 && len(r) >= p.width {
		s = string(r[:p.width-1])
	}
	switch {
	case !p.tty:
		fmt.Fprintln(p.w, s)
	case last:
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", s)
	default:
		fmt.Fprintf(p.w, "\r%s\x1b[K", s)
	}
}

// note prints a line of its own between runs.
func (p *progress) note(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

// plan numbers the phases of a command and says, as each starts, how far
// the command is and about how long it has left. Its first estimate is the
// phases' own (warm-up and measured time plus setup); as phases end, it
// scales what is left by how long those took against their estimates, so
// that a slow or busy host, on which every phase takes longer, gets a
// time left that holds.
type plan struct {
	p      *progress
	expect []time.Duration // of each phase, in order
	next   int
	began  time.Time // when newPlan made the plan
	now    func() time.Time
}

// newPlan returns the plan of phases lasting about expect each, and
// prints what is to come: what, the number of phases and the total time.
func newPlan(p *progress, what string, expect []time.Duration) *plan {
	pl := &plan{p: p, expect: expect, now: time.Now}
	pl.began = pl.now()
	p.note("%s: %s, about %s in all", what, plural(len(expect), "phase"), roundDuration(pl.left(0)))
	return pl
}

// pace returns how long the phases before phase i took against their
// estimates, 1 before any has ended: the factor by which the estimates
// of the phases left are short (above 1) or long. It stays in [1/4, 20]:
// a phase that ended at once, or an estimate of nearly 0, says little.
func (pl *plan) pace(i int) float64 {
	done := pl.expect[:min(i, len(pl.expect))]
	var want time.Duration
	for _, e := range done {
		want += e
	}
	if want <= 0 {
		return 1
	}
	return min(max(float64(pl.now().Sub(pl.began))/float64(want), 0.25), 20)
}

// left is the expected time of the phases from i on.
func (pl *plan) left(i int) time.Duration {
	var d time.Duration
	for _, e := range pl.expect[min(i, len(pl.expect)):] {
		d += e
	}
	return d
}

// start announces the next phase, described by label.
func (pl *plan) start(label string) {
	i := pl.next
	pl.next++
	if i >= len(pl.expect) {
		pl.p.note("%s", label)
		return
	}
	left := time.Duration(float64(pl.left(i)) * pl.pace(i))
	pl.p.note("phase %d of %d (about %s left): %s", i+1, len(pl.expect), roundDuration(left), label)
}

// roundDuration rounds an estimate for people: to the second, and to
// ten seconds from two minutes up.
func roundDuration(d time.Duration) time.Duration {
	if d >= 2*time.Minute {
		return d.Round(10 * time.Second)
	}
	return max(d.Round(time.Second), time.Second)
}
