// Package stress makes rare interleavings of shardwheel's lock-free
// protocols common. The engine calls Point at every step of those
// protocols (the wheel's owner word, each node state transition, the
// crossing of routed timers and their hand-back, the attention stack and
// the queue, parking and waking the shard goroutine, giving back and
// re-making blocks, the keyed index). Built normally, Point is an empty
// function that the compiler removes. Built with the tag shardwheel_stress
// (stress_on.go), each Point may spin for a while or, where the goroutine
// may be descheduled, yield its processor, at random: a goroutine then
// stops between two steps that normally follow each other within
// nanoseconds, while others run, which is what a preemption, an interrupt
// or a slow cache line does once in millions of runs.
//
// The oracle tests (every accepted timer ends exactly once, never early, a
// stale handle changes nothing, Stats add up, no goroutine sleeps while
// work for it waits) run under the tag in CI:
//
//	go test -tags shardwheel_stress -race ./shard/ .
//
// Pinned goroutines (a producer holding a wheel, pinned to its P by
// runtime.procPin) must not be descheduled: the engine brackets such
// sections with Enter and Exit, and Point only spins inside them.
package stress
