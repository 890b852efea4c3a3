package shard

import "runtime"

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
