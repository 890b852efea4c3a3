//go:build !shardwheel_verify

package shard

// debug turns on the invariant checks (see verify_on.go); off by default.
const debug = false
