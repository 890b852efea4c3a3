package shard

import (
	"runtime"
	_ "unsafe" // for go:linkname

	"github.com/shardwheel/shardwheel/internal/stress"
)

// A goroutine token identifies a live goroutine cheaply: CancelWait must
// tell whether it is called from inside the very task it would wait for
// (which would wait forever), and with an executor that task may run on
// any goroutine, so every run records the token of the goroutine running
// it. GoroutineID costs microseconds (it formats a stack trace), far too
// much per run; on amd64, arm64 and 386 the token is the runtime's g
// pointer, read from the thread-local slot or the g register
// (gtoken_*.s), which is unique among live goroutines and constant
// through a goroutine's life. Elsewhere it is
// GoroutineID, plus one so that no token is 0 (gtoken_other.go).

// GoroutineID returns the current goroutine's id, parsed from the header
// line that runtime.Stack prints ("goroutine 42 [running]:"). Go offers no
// cheaper portable identity, and none is needed on a hot path: it costs
// about a microsecond, paid once when a runner's goroutine starts and once
// per Stop, to tell whether Stop runs inside a task (see
// IsShardGoroutine). A flag that a runner sets around its tasks could not
// do it: another goroutine calling Stop while the task runs would see the
// same flag.
func GoroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = len("goroutine ")
	var id uint64
	for i := prefix; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		id = id*10 + uint64(b[i]-'0')
	}
	return id
}

// procPin and procUnpin are the runtime's functions for pinning the
// goroutine to its P: while pinned it is not preempted and stays on its P.
// The runtime does not export them: it keeps them reachable by linkname
// only because widely used packages reach for them (they are on the "hall
// of shame" list in runtime/proc.go, see go.dev/issue/67401), which
// tolerates such use without promising it. Go 1.26 links them with a plain
// go build.
//
// Two things rest on them. The P id picks the shard a timer without a key
// goes to and the lane a goroutine uses, so that goroutines on different
// CPUs use different wheels, free lists and counters. And a producer that
// holds a wheel stays pinned, so that the runtime cannot preempt it in the
// middle and leave the wheel held for a time slice: no correctness rests
// on that (nobody waits for a holder), only how often Schedules find the
// wheel free. A pinned goroutine must not block; a holding producer never
// does.
//
//go:linkname runtimeProcPin runtime.procPin
func runtimeProcPin() int

//go:linkname runtimeProcUnpin runtime.procUnpin
func runtimeProcUnpin()

// procPin pins the caller to its P and returns the P's id. Under the
// stress tag it tells package stress, whose points must not deschedule a
// pinned goroutine.
func procPin() int {
	p := runtimeProcPin()
	if stress.On {
		stress.Enter(p)
	}
	return p
}

// procUnpin undoes procPin.
func procUnpin() {
	if stress.On {
		p := runtimeProcPin()
		runtimeProcUnpin()
		stress.Exit(p)
	}
	runtimeProcUnpin()
}

// CurrentP returns the id of the P running the caller. The goroutine may
// migrate right after: callers use it as a locality hint, never for mutual
// exclusion.
func CurrentP() int {
	p := runtimeProcPin()
	runtimeProcUnpin()
	return p
}

// LocalShard returns the number of P p's own shard among n (a Scheduler's
// shards, or Config.Shards): p modulo n, so that a P beyond GOMAXPROCS at
// New, after a raise, wraps round too. Its AfterFunc and its kin file
// their timers there, and only there do its Schedules hold the wheel
// themselves (see Config.ID).
func LocalShard(p, n int) int {
	if p < n {
		return p // no division on the common path
	}
	return p % n
}
