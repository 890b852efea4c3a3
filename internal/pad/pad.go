// Package pad holds the one cache-line size that every padded structure of
// shardwheel (the shard's lanes and flags, the incoming queues, the node
// pool's free lists) lays its hot fields out against.
package pad

// CacheLineSize is the padding unit. 64 bytes is the line on amd64 and most
// arm64 parts. Intel's adjacent-line prefetcher pulls pairs of lines, which
// would argue for 128, but that doubles every padded header for a gain this
// project has not measured; layout tests in each package pin the choice.
const CacheLineSize = 64
