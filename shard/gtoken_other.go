//go:build !((amd64 || arm64 || 386) && gc)

package shard

// goroutineToken returns a token of the calling goroutine (see gtoken.go):
// its id plus one, never 0. It costs a stack trace's formatting.
func goroutineToken() uintptr { return uintptr(GoroutineID()) + 1 }

// cheapGoroutineToken reports whether a run handed to an executor records
// its goroutine (see Config.Run) without allocating: false on this
// platform, where the stack trace costs an allocation per run.
const cheapGoroutineToken = false
