//go:build shardwheel_stress

package stress

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// On reports whether the interleaving stress mode is built in.
const On = true

// pinned counts, per P (modulo its length), the pinned sections of the
// goroutine running there: a goroutine pinned to P p is the only one that
// runs on p until it unpins, so a goroutine that finds its P's count above
// 0 is that one.
var pinned [1024]atomic.Int32

// Enter records that the goroutine running on P p is pinned to it.
func Enter(p int) { pinned[p%len(pinned)].Add(1) }

// Exit undoes Enter, before the goroutine unpins.
func Exit(p int) { pinned[p%len(pinned)].Add(-1) }

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Point is a step of a lock-free protocol: the caller may pause here. One
// call in four yields its processor (or, pinned, spins up to about 10µs);
// one in sixteen spins up to about 1µs; the rest go on at once.
func Point() {
	r := rand.Uint32()
	switch {
	case r%4 == 0:
		p := procPin()
		isPinned := pinned[p%len(pinned)].Load() > 0
		procUnpin()
		if !isPinned {
			runtime.Gosched()
			return
		}
		spin(r >> 8 % 4096)
	case r%16 == 1:
		spin(r >> 8 % 512)
	}
}

// sink keeps spin's loop from being optimised away.
var sink atomic.Uint32

// spin busies the processor for n rounds of a few nanoseconds.
func spin(n uint32) {
	x := n
	for range n {
		x = x*1664525 + 1013904223
	}
	sink.Store(x)
}
