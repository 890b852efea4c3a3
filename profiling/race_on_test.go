//go:build race

package profiling_test

// raceEnabled reports whether the race detector is on: tests scale their
// loads down under it.
const raceEnabled = true
