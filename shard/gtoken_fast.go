//go:build (amd64 || arm64 || 386) && gc

package shard

// getg returns the address of the calling goroutine's runtime g, from the
// thread-local slot (amd64) or the g register (arm64). See gtoken.go.
//
//go:noescape
func getg() uintptr

// goroutineToken returns a token of the calling goroutine (see gtoken.go):
// never 0.
func goroutineToken() uintptr { return getg() }

// cheapGoroutineToken reports whether a run handed to an executor records
// its goroutine (see Config.Run) without allocating: true on this
// platform.
const cheapGoroutineToken = true
