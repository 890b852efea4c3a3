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
