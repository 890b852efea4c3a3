//go:build shardwheel_verify

package shard

// debug turns on the invariant checks: verify after every pass, and
// assertions where the code relies on a property it could otherwise only
// assume (time never moves backwards). CI runs the tests with it on.
const debug = true
