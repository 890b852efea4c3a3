package shard

import (
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// What Stats shows of the tasks whose runner the shard left behind
// (runner.go).

// blockedRun is the record of a runner left behind its task: written by the
// shard goroutine before the CAS that leaves the runner, and read by
// anyone after (Stats, through blockedView); ran (how long the task ran
// from since) and then done are stored by the runner when the task has
// returned.
type blockedRun struct {
	key   uint64
	keyed bool
	fn    uintptr       // the task's code, for BlockedTask.Func
	gid   uint64        // the runner's goroutine id (IsShardGoroutine)
	since time.Duration // a clock reading at which the task was running already
	ran   atomic.Int64
	done  atomic.Bool
}

// BlockedTask describes a task that ran past Config.BlockedAfter, whose
// runner the shard left behind it (see runner.go), for Stats.
type BlockedTask struct {
	// Key is the timer's key, and Keyed whether the key's later timers
	// are held back until it returns.
	Key   uint64
	Keyed bool
	// Func names the task's function, as the runtime knows it
	// (runtime.FuncForPC); empty if unknown.
	Func string
	// Since is a clock reading at which the task was running already,
	// at most BlockedAfter and a tick after it started; Ran how long it
	// ran from then, to about a tick, once it has returned (else 0).
	Since time.Duration
	Ran   time.Duration
}

// taskCode returns the code pointer of task's function, for the name Stats
// shows.
func (sh *Shard) taskCode(task Task) uintptr {
	if task.Func != nil {
		return reflect.ValueOf(task.Func).Pointer()
	}
	if task.Handler != 0 {
		return reflect.ValueOf(sh.cfg.Handlers.Func(task.Handler)).Pointer()
	}
	return 0
}

// blockedView is what publishBlocked publishes: immutable but for the
// records' done.
type blockedView struct {
	runs    []*blockedRun
	longest BlockedTask
}

// task describes b for Stats.
func (b *blockedRun) task() BlockedTask {
	name := ""
	if fn := runtime.FuncForPC(b.fn); fn != nil {
		name = fn.Name()
	}
	return BlockedTask{Key: b.key, Keyed: b.keyed, Func: name, Since: b.since}
}

// publishBlocked publishes the runners left behind, for Stats and for
// IsShardGoroutine (a blocked task that calls Stop must not wait for
// itself). The shard goroutine.
func (sh *Shard) publishBlocked() {
	sh.blockedNow.Store(&blockedView{runs: slices.Clone(sh.blocked), longest: sh.longest})
}

// Blocked returns the tasks that ran past BlockedAfter and have not
// returned, and the longest of those that have (Ran 0 if none has). Any
// goroutine.
func (sh *Shard) Blocked() (running []BlockedTask, longest BlockedTask) {
	v := sh.blockedNow.Load()
	if v == nil {
		return nil, BlockedTask{}
	}
	longest = v.longest
	for _, b := range v.runs {
		if !b.done.Load() {
			running = append(running, b.task())
		} else if ran := time.Duration(b.ran.Load()); ran > longest.Ran {
			longest = b.task() // returned, and not yet collected
			longest.Ran = ran
		}
	}
	return running, longest
}
