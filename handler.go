package shardwheel

import (
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// MaxHandlers is the most handlers one Scheduler holds (see NewHandler):
// 65535, since a timer names its handler by a 16-bit number and keeps 0
// for "a closure".
const MaxHandlers = 1<<16 - 1

// Handler is a task that many timers share: a function registered once
// with NewHandler, which every timer scheduled through the Handler calls
// with its own key. Such a timer holds no closure: it costs its node alone
// (38 bytes), and the garbage collector has nothing of it to mark. A
// proxy's "fail request id" becomes one Handler instead of a closure per
// request:
//
//	fail, _ := s.NewHandler(func(id uint64) { failRequest(id) })
//	...
//	t, err := fail.AfterFunc(requestID, 30*time.Second)
//
// A Handler's timers are timers like any other: Cancel, Reset, Pending
// and Deadline work on their handles, and Stop returns them, with Task giving
// back a function that calls the handler with the key. With WithExecutor,
// the executor gets the method value of a record of the run that the shard
// pools (it tells the shard when the task has returned, for CancelWait),
// so an expiry allocates nothing there either. An Index holds closures'
// timers only: a Handler's are found through their handles.
//
// A Handler is a small value, safe to copy and to use from any goroutine.
// Handlers are never unregistered. The zero Handler is inert: its methods
// return ErrNilTask.
type Handler struct {
	s  *Scheduler
	id uint16 // the number shard.Handlers gave fn; 0 in the zero Handler
}

// NewHandler registers fn as a handler of s and returns it. It returns
// ErrNilTask for a nil fn, ErrStopped once Stop or Shutdown has been
// called (a Handler of a stopped Scheduler could schedule nothing), and
// ErrTooManyHandlers once s holds MaxHandlers: register a handler per kind
// of timeout (a request's, a connection's), not per timer. It takes a lock
// shared by s's handlers; registering is not meant for a hot path.
func (s *Scheduler) NewHandler(fn func(key uint64)) (Handler, error) {
	s.mustBeNew()
	if fn == nil {
		return Handler{}, ErrNilTask
	}
	if s.stopping.Load() {
		return Handler{}, ErrStopped
	}
	id, ok := s.handlers.Add(fn)
	if !ok {
		return Handler{}, ErrTooManyHandlers
	}
	return Handler{s: s, id: id}, nil
}

// AfterFunc is Scheduler.AfterFunc for a timer whose task is the
// handler's function called with arg: it runs fn(arg) once, delay from
// now, on the shard of the P the caller runs on, or, with ByKey(arg), on
// the shard arg routes to. Without a key it is the cheapest timer there
// is: no closure, no routing, a node on the caller's own wheel. Its
// Timer's Key is arg. Options, delays, errors and guarantees are
// Scheduler.AfterFunc's, and the zero Handler's calls return ErrNilTask;
// it allocates nothing, closure included.
func (h Handler) AfterFunc(arg uint64, delay time.Duration, opts ...TimerOption) (Timer, error) {
	if h.s == nil {
		return Timer{}, ErrNilTask
	}
	return h.s.schedule("Handler.AfterFunc", false, arg, true, delay, h.task(), opts)
}

// Every is Scheduler.Every for a series whose task is the handler's
// function called with arg: it runs fn(arg) at the grid points start +
// k·period, on the shard of the P the caller runs on, or, with
// ByKey(arg), on the shard arg routes to. Options, periods, policies,
// errors and guarantees are Scheduler.Every's, and the zero Handler's
// calls return ErrNilTask; it allocates nothing in steady state.
func (h Handler) Every(arg uint64, period time.Duration, opts ...TimerOption) (Timer, error) {
	if h.s == nil {
		return Timer{}, ErrNilTask
	}
	return h.s.schedule("Handler.Every", true, arg, true, period, h.task(), opts)
}

// task returns the handler as a timer's task.
func (h Handler) task() shard.Task { return shard.Task{Handler: h.id} }
