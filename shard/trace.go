package shard

import (
	"context"
	"runtime/trace"
	"strconv"
)

// Passes in the execution tracer.
//
// Operators read tick lag off go tool trace as well as off Stats: a late
// tick shows on the trace's timeline next to the goroutine that held the
// CPU meanwhile. While tracing is on (runtime/trace.IsEnabled), each pass
// of a shard goroutine is a region of type RegionPass, and logs, in it,
// the shard's number (category LogShard) and what the pass did (category
// LogWork):
//
//	taken_in  new timers it moved from the queue into the wheel
//	filed     timers it filed again that were not new: periodic timers
//	          after a run, Resets it took off the attention stack
//	fired     tasks it handed to the runner (periodic runs included)
//	refiled   timers it moved within the wheel, cascades aside: Resets
//	          found at their old slot or taken off the attention stack
//	cascaded  timers cascades moved down the wheel
//
// With tracing off a pass costs one more atomic load (trace.IsEnabled),
// which BenchmarkPassTracingOff measures.

// Names of what the shard puts in an execution trace.
const (
	RegionPass = "shardwheel.pass"
	LogShard   = "shardwheel.shard"
	LogWork    = "shardwheel.work"
)

// tracer is what a shard goroutine keeps for the tracer: the shard's
// number as the message of its LogShard entries, made at the first traced
// pass. The shard goroutine's.
type tracer struct{ shard string }

// tracedPass is pass as a region of the execution trace.
func (sh *Shard) tracedPass() {
	ctx := context.Background()
	region := trace.StartRegion(ctx, RegionPass)
	defer region.End()
	if sh.trace.shard == "" {
		sh.trace.shard = strconv.Itoa(sh.id)
	}
	trace.Log(ctx, LogShard, sh.trace.shard)
	sh.passBody()
	w := sh.work
	b := make([]byte, 0, 128)
	b = append(b, "taken_in="...)
	b = strconv.AppendInt(b, int64(w.transferred), 10)
	b = append(b, " filed="...)
	b = strconv.AppendInt(b, int64(w.filed), 10)
	b = append(b, " fired="...)
	b = strconv.AppendInt(b, int64(w.fired), 10)
	b = append(b, " refiled="...)
	b = strconv.AppendInt(b, int64(w.refiled-w.cascaded), 10)
	b = append(b, " cascaded="...)
	b = strconv.AppendInt(b, int64(w.cascaded), 10)
	trace.Log(ctx, LogWork, string(b))
}
