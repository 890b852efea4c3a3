package shardwheel

// TraceRegionPass is the type of the execution tracer's region (see
// runtime/trace) that each pass of a shard goroutine is while tracing is
// on: go tool trace lists the passes under it, on the Regions page, each
// with two logs, its shard's number (category "shardwheel.shard") and
// what it did (category "shardwheel.work": timers taken_in from the
// queue, filed again, fired, refiled within the wheel and cascaded, and
// task_ns, how long its tasks held the shard). With tracing off a pass
// pays one atomic load for it. It is the engine's
// name (TestTraceRegionIsTheEngines).
const TraceRegionPass = "shardwheel.pass"
