//go:build !((amd64 || arm64) && gc)

package shard

// goroutineToken returns a token of the calling goroutine (see gtoken.go):
// its id plus one, never 0. It costs a stack trace's formatting.
func goroutineToken() uintptr { return uintptr(GoroutineID()) + 1 }
