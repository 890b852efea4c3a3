package shard

import "runtime"

// goid returns the current goroutine's id, parsed from the header line that
// runtime.Stack prints ("goroutine 42 [running]:"). It costs about a
// microsecond, so it is used only on cold paths: when a worker starts and
// when Stop must tell whether it runs inside a task.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = len("goroutine ")
	var id uint64
	for i := prefix; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		id = id*10 + uint64(b[i]-'0')
	}
	return id
}
