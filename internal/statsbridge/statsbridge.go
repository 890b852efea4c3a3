// Package statsbridge lets the root package build a stats.Stats without
// package stats exporting its constructor: package stats sets Collect when
// it is initialised, which is before the root package (which imports it)
// can call it.
package statsbridge

import "github.com/shardwheel/shardwheel/shard"

// Collect returns the stats.Stats of a Scheduler whose Pending read
// pending and whose n shards report shard(i), as an any holding a
// stats.Stats (this package cannot name the type: stats imports it).
var Collect func(pending, n int, shard func(i int) shard.Stats) any
