package shard

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A run: a task started by its runner (runner.go), timed, its panic or
// runtime.Goexit reported. Everything here is the runner's goroutine's,
// but report and reportPanic, which an executor's goroutine calls too.

// ErrGoexit is the value the panic handler receives for a task that called
// runtime.Goexit instead of returning.
var ErrGoexit = errors.New("shardwheel: task called runtime.Goexit")

// run starts run x: its task, or, with an executor, the executor's run
// call with it. With Stats, it records the task's lateness (from its
// deadline tick to its start) and its time, one clock read a task (see
// now; a task that ends its goroutine is not timed). A panic is recovered
// and reported; a runtime.Goexit (the task's, or the panic handler's)
// finishes the run and goes on through loop. The runner's goroutine.
func (r *runner) run(x *execRun) {
	sh := r.sh
	var start time.Duration
	if sh.cfg.Stats {
		if !r.fresh {
			r.now = sh.clock.Now()
		}
		start = r.now
		r.late.Record(int64(start - sh.tickTime(x.tick)))
		r.fresh = false // a Goexit skips the end: the next run reads the clock
	}
	if x.series && x.cancelled() {
		// Cancelled while queued: the series runs no more. (A run that
		// Stop's Drain found handed out runs: it is the series' last,
		// and Stop does not return the series.)
		x.finish()
		r.ended(start)
		return
	}
	if sh.cfg.Run != nil {
		// The run reports and finishes itself (exec); here only a
		// panic or Goexit of the executor's own.
		if v := call(func() { sh.cfg.Run(x.do) }); v != nil {
			sh.report(v)
		}
		r.ended(start)
		return
	}
	x.g.Store(r.token.Load())
	returned, reporting := false, false
	defer func() {
		if !returned { // a Goexit: the task's, or the panic handler's
			defer x.finish() // run by the handler's own Goexit too
			if !reporting {
				sh.report(ErrGoexit)
			}
		}
	}()
	if v := call(x.call); v != nil {
		reporting = true
		sh.report(v)
		reporting = false
	}
	returned = true
	x.finish()
	r.ended(start)
}

// ended records, with Stats, the time of the run that started at clock
// reading start, whose end starts the next (see now). The runner's
// goroutine.
func (r *runner) ended(start time.Duration) {
	if sh := r.sh; sh.cfg.Stats {
		r.now, r.fresh = sh.clock.Now(), true
		r.took.Record(int64(r.now - start))
	}
}

// call calls f and returns the value of its panic, or nil if it returned.
// A nil panic reports a *runtime.PanicNilError, which recover returns for
// it, or, where GODEBUG=panicnil=1 makes recover return nil, one made
// here. A Goexit never returns from call.
func call(f func()) (panicked any) {
	returned := false
	defer func() {
		if !returned {
			if panicked = recover(); panicked == nil {
				panicked = new(runtime.PanicNilError)
			}
		}
	}()
	f()
	returned = true
	return nil
}

// report counts v, the value of a task's panic or ErrGoexit, in Panics (by
// aborts: countAborts adds it up in the shard goroutine's next pass, which
// it wakes for) and hands it to the panic handler. A handler that calls
// runtime.Goexit ends the goroutine as a task's Goexit would. The goroutine
// that ran the task.
// Report reports v as a task's panic: the panic handler gets it and Stats
// count it in Panics. Any goroutine (package shardwheel's plan wrapper, for
// a plan that panicked).
func (sh *Shard) Report(v any) { sh.report(v) }

func (sh *Shard) report(v any) {
	sh.wrote(lineExecutor)
	sh.aborts.Add(1)
	sh.signal()
	reportPanic(sh.cfg.OnPanic, v)
}

// reportPanic hands v to the panic handler. A handler that panics itself
// must not kill the runner either: its panic is recovered and dropped, as
// there is nobody left to report it to. A handler's runtime.Goexit cannot
// be stopped: the callers see it.
func reportPanic(onPanic func(any), v any) {
	defer func() { _ = recover() }()
	onPanic(v)
}

// maxHandlers is the most handlers one table holds: a timer names its
// handler by a 16-bit number, 0 meaning "a closure".
const maxHandlers = 1<<16 - 1

// handlerChunk is how many handlers one chunk of a table holds.
const handlerChunk = 256

// Handlers is a table of functions that timers name by number instead of
// each holding a closure (see pool.Slot.SetTask), so that a timer costs its
// node alone and the garbage collector has nothing of it to mark. Handlers
// are added once and never removed; one table serves every shard of a
// scheduler. The zero value is an empty table.
//
// Ownership and ordering: Add runs under mu and writes each entry once,
// before it returns the entry's number; a timer carrying that number is
// published to the shard goroutine afterwards (the producer's state store,
// then its hold's release or its queue push), so that goroutine's read of
// the entry in Func is ordered after the write. Chunks never move: growing
// copies only the slice of chunk pointers, which Func loads atomically.
type Handlers struct {
	mu     sync.Mutex
	n      int                                           // entries used, under mu; number 0 is never handed out
	chunks atomic.Pointer[[]*[handlerChunk]func(uint64)] // copy-on-write under mu
}

// Add registers fn and returns its number (1..maxHandlers), or false when
// the table is full.
func (t *Handlers) Add(fn func(uint64)) (uint16, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.n + 1
	if h > maxHandlers {
		return 0, false
	}
	var chunks []*[handlerChunk]func(uint64)
	if p := t.chunks.Load(); p != nil {
		chunks = *p
	}
	if h/handlerChunk == len(chunks) {
		grown := append(chunks[:len(chunks):len(chunks)], new([handlerChunk]func(uint64)))
		t.chunks.Store(&grown)
		chunks = grown
	}
	chunks[h/handlerChunk][h%handlerChunk] = fn
	t.n = h
	return uint16(h), true
}

// Func returns handler h's function. h must be a number Add returned, to
// a caller ordered after that Add (see Handlers).
func (t *Handlers) Func(h uint16) func(uint64) {
	return (*t.chunks.Load())[h/handlerChunk][h%handlerChunk]
}
