package shard

import _ "unsafe" // for go:linkname

// procPin and procUnpin are the runtime's functions for pinning the
// goroutine to its P. The runtime does not export them: it keeps them
// reachable by linkname only because widely used packages reach for them
// (they are on the "hall of shame" list in runtime/proc.go, see
// go.dev/issue/67401), which tolerates such use without promising it. A Go
// release could break this file; the lane choice would then need the
// portable fallback below.
//
// We pin only to read the P's id and unpin at once. The P id picks the
// producer's lane, so that producers running on different CPUs use
// different queues, free lists and counters. The portable alternative, a
// sync.Pool of lane tokens as xsync's Counter uses, measured 18 ns of CPU
// per Get+Put on this project's 2-core machine against 4 ns for
// procPin+procUnpin, on a Schedule that costs about 50 ns in all.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// currentP returns the id of the P running the caller. The goroutine may
// migrate right after: callers use it as a locality hint, never for mutual
// exclusion.
func currentP() int {
	p := procPin()
	procUnpin()
	return p
}
