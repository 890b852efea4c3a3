//go:build !race

package shardwheel_test

// raceEnabled reports whether the race detector is on: tests scale their
// loads down under it.
const raceEnabled = false
