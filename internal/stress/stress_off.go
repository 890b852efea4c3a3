//go:build !shardwheel_stress

package stress

// On reports whether the interleaving stress mode is built in.
const On = false

// Point is a step of a lock-free protocol: a no-op without the tag.
func Point() {}

// Enter records that the goroutine running on P p is pinned to it: a
// no-op without the tag.
func Enter(p int) {}

// Exit undoes Enter: a no-op without the tag.
func Exit(p int) {}
