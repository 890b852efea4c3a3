package shardwheel

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/shard"
)

// Contexts whose deadlines live in the wheel: the functions of package
// context, with a wheel timer in place of a runtime timer.
//
// # Design
//
// A context is one timerCtx and one closure, fire, its method value: fire
// is at once the wheel timer's task, the CancelFunc the caller gets and the
// function context.AfterFunc calls when the parent is done. fire tells its
// callers apart by what it observes, never by who calls it:
//
//   - the parent's Err is set: the parent is done (its callback, or a
//     cancel racing it: the parent's cancellation then counts first, as it
//     would have reached a child of package context synchronously);
//   - Cancel on the wheel timer succeeds: the timer was pending, so the
//     caller is the CancelFunc before the deadline;
//   - the timer has ended and the clock is still before the deadline: Stop
//     claimed it (a fired timer is never early), and the caller is the
//     CancelFunc;
//   - otherwise the deadline has passed: the wheel fired, or Stop's
//     hand-over did (see handOver), or a CancelFunc lost a race to either,
//     which package context allows too.
//
// One closure is what keeps a context at two allocations.
//
// The parent is watched lazily. A context of package context registers in
// its parent's children at birth; this one looks at its parent when asked
// (Err, and Value for context.Cause, read the parent's Err), and registers
// with it (context.AfterFunc) only once someone can wait for it: the first
// Done, or a child attaching through AfterFunc. A proxy's per-request
// context that is cancelled when the response comes, the common case,
// never pays for the registration.

// Context states. A context goes live -> closing (the one finish call that
// won) -> why -> why|ctxPublished, and never back.
const (
	ctxLive uint32 = iota
	ctxClosing
	ctxCanceled   // the CancelFunc, before the deadline
	ctxExpired    // the deadline
	ctxParentDone // the parent was done first: Err and Cause are the parent's
	// ctxPublished is set once Done is closed; Err is non-nil from the
	// state before it, and then waits for Done.
	ctxPublished uint32 = 8
)

// timerCtx is the context of WithDeadlineCause: 112 bytes, so that with
// fire it stays within two allocations and 128 bytes.
type timerCtx struct {
	// Immutable once the context is published (to the wheel by Schedule,
	// to the caller by the return).
	parent   context.Context
	deadline time.Time
	sh       *shard.Shard // the shard of the wheel timer; nil for a context done at birth
	fireFn   func()       // c.fire, made once (a method value allocates)

	ref   shard.AtomicRef // the wheel timer's; the zero Ref until Schedule returned
	state atomic.Uint32   // see the constants: CAS from ctxLive by finish only
	// watch is watchParent's progress: unwatched, then watching while it
	// registers, then watched once stopParent is stored.
	watch atomic.Uint32
	// stopParent unregisters the context from its parent. Written by
	// watchParent before it stores watched, read after loading watched.
	stopParent func() bool
	// done is Done's channel: made by Done, by CAS from nil, or sealed by
	// finish with &closedChan, by CAS from nil. finish is its only closer:
	// when its CAS fails, Done made a channel first, and finish closes it.
	done atomic.Pointer[chan struct{}]
	// x holds what most contexts never need. Created by the constructor
	// (a cause) or by AfterFunc, by CAS; never replaced.
	x atomic.Pointer[ctxExtra]
}

// ctxExtra is a context's rarely used part.
type ctxExtra struct {
	cause error // immutable: Cause after the deadline (WithDeadlineCause)
	// causeCtx carries cause to context.Cause (see Value). Written by
	// finish before it stores ctxExpired; read after loading that state.
	causeCtx context.Context

	mu     sync.Mutex
	funcs  map[*afterFunc]struct{} // AfterFunc registrations; guarded by mu
	sealed bool                    // finish has taken funcs; guarded by mu
}

// watch states.
const (
	unwatched uint32 = iota
	watching
	watched
)

type afterFunc struct{ f func() }

// closedChan is the Done channel of contexts that were done before anyone
// asked for it.
var closedChan = make(chan struct{})

func init() { close(closedChan) }

// WithTimeout is context.WithTimeout with its deadline kept in s's wheel:
// WithDeadline(parent, time.Now().Add(timeout)). The deadline is read off
// the monotonic clock: its monotonic reading is now's plus timeout, and its
// wall-clock reading is the Scheduler's start plus the monotonic time
// elapsed since, which differs from time.Now's if the wall clock was set
// meanwhile. (Time comparisons, time.Until and package context use the
// monotonic reading.)
func (s *Scheduler) WithTimeout(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return s.WithTimeoutCause(parent, timeout, nil)
}

// WithTimeoutCause is context.WithTimeoutCause with its deadline kept in
// s's wheel: WithDeadlineCause(parent, time.Now().Add(timeout), cause),
// with WithTimeout's deadline.
func (s *Scheduler) WithTimeoutCause(parent context.Context, timeout time.Duration, cause error) (context.Context, context.CancelFunc) {
	s.mustBeNew()
	now, ok := s.since()
	if !ok || timeout > s.MaxDelay() {
		// Beyond MaxDelay the deadline would go to a runtime timer
		// anyway (see WithDeadlineCause): package context computes it
		// as it would have, never wrapping "now plus timeout" round.
		return context.WithTimeoutCause(parent, timeout, cause)
	}
	return s.withDeadline(parent, now, s.epoch.Add(now+timeout), cause)
}

// WithDeadline is context.WithDeadline with its deadline kept in s's
// wheel: WithDeadlineCause(parent, d, nil).
func (s *Scheduler) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return s.WithDeadlineCause(parent, d, nil)
}

// WithDeadlineCause is context.WithDeadlineCause with its deadline kept in
// s's wheel instead of a runtime timer. It returns a context derived from
// parent, with parent's values, that is done when d passes (Err
// context.DeadlineExceeded, context.Cause cause or, if cause is nil,
// DeadlineExceeded), when the returned CancelFunc is called (Canceled) or
// when parent is done (parent's Err and Cause), whichever comes first. If
// parent's deadline is earlier than d it returns context.WithCancel(parent),
// as package context does; if d has passed, a context that is already
// done.
//
// Done is never closed before d, and less than a tick after it plus the
// shard's tick lag (see the package documentation on lateness). The CancelFunc may be called
// any number of times from any goroutine; the first call before the
// deadline cancels the wheel timer, so Pending drops at once. It does not
// set the cause.
//
// No goroutine is started for the context. Err and context.Cause see the
// parent's cancellation at once, as they would of a child of package
// context. The context registers with its parent (context.AfterFunc,
// unregistered when the context ends) only when Done is first called or a
// child attaches, since until then nobody can wait for it: so call the
// CancelFunc, as package context asks, or a context whose parent was
// cancelled keeps its wheel timer until its deadline. It implements
// AfterFunc, so context.WithCancel and context.AfterFunc on it attach
// without a goroutine either. (When the parent is cancelled first,
// context.AfterFunc runs its callback on a goroutine of its own, as it
// always does.)
//
// A caller inside a testing/synctest bubble that s was not made in (or
// outside the bubble s was made in) gets context.WithDeadlineCause(parent,
// d, cause): the bubble's clock and timers are not s's, and its channels
// may not be closed from outside it.
//
// A deadline is never lost. When s cannot hold the timer (after Stop, at
// the WithMaxPending limit, or beyond MaxDelay) the function returns
// context.WithDeadlineCause(parent, d, cause) instead. When Stop claims the
// timer of a context made before it, Stop hands it to a runtime timer that
// ends the context at its deadline (see Stop).
func (s *Scheduler) WithDeadlineCause(parent context.Context, d time.Time, cause error) (context.Context, context.CancelFunc) {
	s.mustBeNew()
	now, ok := s.since()
	if !ok {
		return context.WithDeadlineCause(parent, d, cause)
	}
	return s.withDeadline(parent, now, d, cause)
}

// since returns the monotonic time elapsed since s's epoch, and false if
// the caller is in a testing/synctest bubble s was not made in, or outside
// the one it was: there the caller's clock is not s's. time.Since reads
// the bubble's fake clock, whose 2000-01-01 start lies before any epoch
// outside a bubble; a Scheduler made in a bubble pays a time.Now to tell.
func (s *Scheduler) since() (time.Duration, bool) {
	if s.bubbled {
		now := time.Now()
		return now.Sub(s.epoch), shard.InBubble(now)
	}
	d := time.Since(s.epoch)
	return d, d >= 0
}

// withDeadline is WithDeadlineCause given now, the time elapsed since the
// epoch: a clock read costs a good part of the whole call, and WithTimeout
// has read it already.
func (s *Scheduler) withDeadline(parent context.Context, now time.Duration, d time.Time, cause error) (context.Context, context.CancelFunc) {
	if parent == nil {
		panic("cannot create context from nil parent")
	}
	if cur, ok := parent.Deadline(); ok && cur.Before(d) {
		return context.WithCancel(parent)
	}
	// d is due at d.Sub(epoch) on the monotonic clock, and the shards'
	// clock reads at most skew more then (see shard.NewClock): due at that
	// reading, the timer is never early.
	at := d.Sub(s.epoch) // saturated by Sub for dates centuries away
	delay := shard.AddDuration(at, -now)
	c := &timerCtx{parent: parent, deadline: d}
	if cause != nil {
		c.x.Store(&ctxExtra{cause: cause})
	}
	fire := c.fire // the one closure: evaluating c.fire again would allocate again
	c.fireFn = fire
	if parent.Err() != nil {
		c.finish(ctxParentDone)
		return c, fire
	}
	if delay <= 0 {
		c.finish(ctxExpired)
		return c, fire
	}
	if delay > s.MaxDelay() || at > maxDuration-s.skew {
		return context.WithDeadlineCause(parent, d, cause)
	}
	c.sh = s.localShard()
	if c.sh.Closed() {
		return context.WithDeadlineCause(parent, d, cause)
	}
	t, err := s.scheduleOn(c.sh, &shard.Request{Now: now, Delay: delay + s.skew, Task: shard.Task{Func: fire}})
	if err != nil {
		return context.WithDeadlineCause(parent, d, cause)
	}
	stress.Point()
	c.ref.Store(t.ref)
	stress.Point()
	// The parent may have ended the context before the store: finish
	// found no timer to cancel then, so cancel it here. (finish stores the
	// state before it loads ref, and we store ref before loading the
	// state: one of us sees the other. Both may cancel; one wins.)
	if c.state.Load() != ctxLive {
		t.Cancel()
	}
	return c, fire
}

const maxDuration = time.Duration(1<<63 - 1)

// fire is the context's CancelFunc, its wheel timer's task and its parent's
// callback; see the design comment at the top of the file for how it tells
// them apart.
func (c *timerCtx) fire() {
	if c.state.Load() != ctxLive {
		<-c.Done() // a call that lost the race returns once the winner is done
		return
	}
	switch {
	case c.parent.Err() != nil:
		c.finish(ctxParentDone)
	case c.cancelTimer():
		c.finish(ctxCanceled)
	case c.sh.Now() < c.sh.Reading(c.deadline):
		c.finish(ctxCanceled) // Stop claimed the timer
	default:
		c.finish(ctxExpired)
	}
}

// cancelTimer cancels the wheel timer and reports whether this call did.
func (c *timerCtx) cancelTimer() bool {
	r := c.ref.Load()
	return !r.IsZero() && c.sh.Cancel(r)
}

// finish ends the context for reason why, once; a call that loses waits
// until the winner has closed Done.
func (c *timerCtx) finish(why uint32) {
	if !c.state.CompareAndSwap(ctxLive, ctxClosing) {
		<-c.Done()
		return
	}
	if x := c.x.Load(); why == ctxExpired && x != nil && x.cause != nil {
		cc, cancel := context.WithCancelCause(context.Background())
		cancel(x.cause)
		x.causeCtx = cc
	}
	// The wheel timer goes before Done closes, so that whoever waits for
	// Done (a CancelFunc that lost the race among them) finds it gone.
	if why == ctxParentDone {
		c.cancelTimer()
	}
	c.state.Store(why)
	stress.Point()
	if !c.done.CompareAndSwap(nil, &closedChan) {
		close(*c.done.Load())
	}
	c.state.Store(why | ctxPublished)
	// Loaded after the state store; AfterFunc stores x before it loads
	// the state: one of us sees the other.
	// Loaded after the state store; watchParent stores watched before it
	// loads the state: one of us sees the other, and unregisters.
	if why != ctxParentDone && c.watch.Load() == watched {
		c.stopParent()
	}
	if x := c.x.Load(); x != nil {
		x.mu.Lock()
		funcs := x.funcs
		x.funcs, x.sealed = nil, true
		x.mu.Unlock()
		for a := range funcs {
			a.f()
		}
	}
}

// extra returns the context's ctxExtra, making it if need be.
func (c *timerCtx) extra() *ctxExtra {
	if x := c.x.Load(); x != nil {
		return x
	}
	c.x.CompareAndSwap(nil, &ctxExtra{})
	return c.x.Load()
}

// watchParent registers the context with its parent, once, so that the
// parent's cancellation ends it without anyone reading Err: the first
// Done and AfterFunc call it (see the design comment). A context that has
// ended, or whose parent can never be cancelled, needs none.
func (c *timerCtx) watchParent() {
	if c.watch.Load() != unwatched || c.state.Load() != ctxLive || c.parent.Done() == nil {
		return
	}
	if !c.watch.CompareAndSwap(unwatched, watching) {
		return // another goroutine registers it
	}
	// context.AfterFunc runs fire on a goroutine of its own if the parent
	// is done already.
	c.stopParent = context.AfterFunc(c.parent, c.fireFn)
	c.watch.Store(watched)
	if c.state.Load() != ctxLive && c.state.Load()&^ctxPublished != ctxParentDone {
		c.stopParent() // finish ran meanwhile and did not see watched
	}
}

// Deadline returns the deadline the context was made with.
func (c *timerCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel that is closed when the context is done.
func (c *timerCtx) Done() <-chan struct{} {
	if p := c.done.Load(); p != nil {
		return *p
	}
	ch := make(chan struct{})
	if c.done.CompareAndSwap(nil, &ch) {
		c.watchParent() // someone may wait for it now
		return ch
	}
	return *c.done.Load() // finish sealed it, or another Done made one
}

// Err returns nil until Done is closed, then why the context is done. A
// parent that is done ends the context here already, as it would have
// reached a child of package context synchronously, rather than when
// context.AfterFunc's goroutine gets to it.
func (c *timerCtx) Err() error {
	s := c.state.Load()
	if s == ctxLive && c.parent.Err() != nil {
		c.finish(ctxParentDone)
		s = c.state.Load()
	}
	if s&ctxPublished == 0 {
		if s <= ctxClosing {
			return nil
		}
		<-c.Done() // finish is closing it
	}
	switch s &^ ctxPublished {
	case ctxCanceled:
		return context.Canceled
	case ctxExpired:
		return context.DeadlineExceeded
	}
	return c.parent.Err()
}

// cancelCtxKey is the key under which package context's own contexts
// return themselves from Value, found by asking context.Cause, which looks
// it up (context.go, func Cause). context.Cause reports the cause of the
// nearest such context; Value answers that lookup so that it reports the
// cause this context ended with, not an ancestor's.
var cancelCtxKey = func() any {
	var p keyProbe
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe records the key context.Cause looks up.
type keyProbe struct {
	context.Context
	key any
}

func (*keyProbe) Err() error { return context.Canceled }

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// Value returns parent's value for key.
func (c *timerCtx) Value(key any) any {
	if key == cancelCtxKey && key != nil {
		if c.state.Load() == ctxLive && c.parent.Err() != nil {
			c.finish(ctxParentDone) // as Err would: the cause is the parent's
		}
		switch c.state.Load() &^ ctxPublished {
		case ctxParentDone:
			return c.parent.Value(key) // the parent's cause
		case ctxExpired:
			if x := c.x.Load(); x != nil && x.causeCtx != nil {
				return x.causeCtx.Value(key) // a context whose cause is ours
			}
		}
		return nil // Cause falls back to Err
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to be called once the context is done, and
// returns a function that unregisters f, reporting whether it did so before
// f was started. This is the method context.AfterFunc and
// context.WithCancel look for, so that they attach to the context without
// a goroutine. f is called on the goroutine that ends the context (a shard
// goroutine when the deadline passes), so it must be quick and must not
// block: context.AfterFunc(ctx, f) runs f on a goroutine of its own. If
// the context is already done, f is started on a new goroutine at once.
func (c *timerCtx) AfterFunc(f func()) (stop func() bool) {
	x := c.extra()
	a := &afterFunc{f: f}
	x.mu.Lock()
	if x.sealed || c.state.Load() > ctxClosing {
		x.mu.Unlock()
		go f() // the caller may hold locks f takes (context.WithCancel does)
		return func() bool { return false }
	}
	if x.funcs == nil {
		x.funcs = make(map[*afterFunc]struct{})
	}
	x.funcs[a] = struct{}{}
	x.mu.Unlock()
	c.watchParent() // f must run when the parent ends it
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		_, ok := x.funcs[a]
		delete(x.funcs, a)
		return ok
	}
}

// String describes the context as package context describes its own.
func (c *timerCtx) String() string {
	name := reflect.TypeOf(c.parent).String()
	if s, ok := c.parent.(fmt.Stringer); ok {
		name = s.String()
	}
	return fmt.Sprintf("%s.WithDeadline(%v [%v])", name, c.deadline, time.Until(c.deadline))
}

// fireCode is the code pointer of every timerCtx.fire closure.
var fireCode = reflect.ValueOf((*timerCtx)(nil).fire).Pointer()

// handOver gives task, the task of a timer Stop claimed on sh, due at
// clock reading due, to a runtime timer that calls it then if it is a
// context's fire, and reports whether it did. fire then ends the context
// as it would have from the wheel (or cancels it, for a timer a user
// scheduled with a CancelFunc as its task, due before the context's
// deadline). The runtime timer follows the clock of the goroutine that
// calls Stop, which inside a testing/synctest bubble is the bubble's: so
// it looks at the shards' clock when it fires, and waits on if the
// deadline has not come on that clock yet.
func (s *Scheduler) handOver(sh *shard.Shard, task shard.Task, due time.Duration) bool {
	f := task.Func
	if f == nil || reflect.ValueOf(f).Pointer() != fireCode {
		return false
	}
	var at func()
	at = func() {
		if left := due - sh.Now(); left > 0 {
			time.AfterFunc(left, at)
			return
		}
		f()
	}
	time.AfterFunc(due-sh.Now(), at)
	return true
}
