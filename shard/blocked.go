package shard

import (
	"reflect"
	"runtime"
	"time"
)

// What Stats shows of the tasks takeovers left running (takeover.go), and
// how the shard goroutine learns that one has returned.

// BlockedTask describes a task a takeover left running on a goroutine of
// its own (see takeover.go), for Stats.
type BlockedTask struct {
	// Key is the timer's key, and Keyed whether the key's later timers
	// are held back until it returns.
	Key   uint64
	Keyed bool
	// Func names the task's function, as the runtime knows it
	// (runtime.FuncForPC); empty if unknown.
	Func string
	// Since is the clock reading at which the task started, to about
	// TakeoverAfter; Ran how long it ran, to about a tick, once it has
	// returned (else 0).
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

// collectReturned lets the keys of the blocked runs that have returned go
// and forgets the runs. The shard goroutine, in its pass.
func (sh *Shard) collectReturned() {
	if sh.returned.Load() == nil {
		return
	}
	now := sh.clock.Now()
	for rec := sh.returned.Swap(nil); rec != nil; rec = rec.next {
		if ran := max(now-rec.since, time.Nanosecond); ran > sh.longest.Ran {
			sh.longest = rec.task()
			sh.longest.Ran = ran
		}
		if rec.keyed {
			sh.releaseKey(rec.key)
		}
		for i, b := range sh.blocked {
			if b == rec {
				sh.blocked = append(sh.blocked[:i], sh.blocked[i+1:]...)
				break
			}
		}
	}
	sh.publishBlocked()
}

// blockedView is what publishBlocked publishes: immutable.
type blockedView struct {
	tasks   []BlockedTask
	gids    []uint64
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

// publishBlocked publishes the blocked runs, for Stats and for
// IsShardGoroutine (a blocked task that calls Stop must not wait for
// itself). The shard goroutine.
func (sh *Shard) publishBlocked() {
	v := &blockedView{tasks: make([]BlockedTask, len(sh.blocked)), gids: make([]uint64, len(sh.blocked)),
		longest: sh.longest}
	for i, b := range sh.blocked {
		v.tasks[i] = b.task()
		v.gids[i] = b.gid
	}
	sh.blockedNow.Store(v)
}

// Blocked returns the tasks takeovers left running, that have not
// returned yet, and the longest of those that have (Ran 0 if none has).
// Any goroutine.
func (sh *Shard) Blocked() (running []BlockedTask, longest BlockedTask) {
	if v := sh.blockedNow.Load(); v != nil {
		return v.tasks, v.longest
	}
	return nil, BlockedTask{}
}
