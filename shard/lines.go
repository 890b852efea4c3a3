package shard

import "sync/atomic"

// Who writes which of the Shard's cache lines, as doc.go's table says,
// recorded with the verify tag: every write of a field the table names
// goes with a call of wrote, which notes the role of the goroutine
// writing (the shard goroutine, another goroutine holding the wheel, or
// any other), and TestLineWriters holds the table's "written by" column
// to what a mixed load recorded. Without the tag wrote compiles to
// nothing.

// lineGroup is a group of doc.go's table: fields on lines of their own.
type lineGroup uint8

const (
	lineFixed lineGroup = iota
	lineOwner
	lineQueue
	lineBacklog
	lineAttention
	linePlan
	lineStarved
	lineRuns
	lineExecutor
	lineHolder
	lineGoroutine
	numLineGroups
)

// lineGroupNames are the groups as the table names them.
var lineGroupNames = [numLineGroups]string{
	"fixed", "owner", "queue", "backlog", "attention", "plan", "starved", "runs", "executor", "holder", "goroutine",
}

// Writer roles, as bits of lineWriters' words.
const (
	roleGoroutine = 1 << iota // the shard's own goroutine
	roleHolder                // another goroutine, holding the wheel
	roleOther                 // any other goroutine
)

// lineWriters holds, per group, the roles that wrote it: Or'ed in by any
// goroutine, read by tests. Made by New with the verify tag, nil without.
type lineWriters [numLineGroups]atomic.Uint32

// wrote records, with the verify tag, that the calling goroutine writes a
// field of group g. Any goroutine; never blocks.
func (sh *Shard) wrote(g lineGroup) {
	if debug {
		sh.lines[g].Or(sh.writerRole())
	}
}

// writerRole returns the role of the calling goroutine on this shard.
func (sh *Shard) writerRole() uint32 {
	switch me := goroutineToken(); {
	case me == sh.g.Load():
		return roleGoroutine
	case sh.h.by.Load() == me:
		return roleHolder
	}
	return roleOther
}
