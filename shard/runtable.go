package shard

import (
	"math/bits"
	"sync/atomic"
)

// The run table: where the runs in flight are published.
//
// A runTable is an open hash set of run words: buckets of runBucket
// slots, one cache line of words each. A run word goes in one of the two
// buckets its two hashes name (bucketsOf), the first while it is at most
// half full, else the one with more free slots (word 0): with two choices
// a table fills to about 70% before a bucket overflows, where with one it
// would overflow at 15-30%. runs holds, slot for slot, the execRun whose
// word it is, which names the goroutine running its task (g). Only the
// shard goroutine adds words (publishRun), and it never moves one: a run's
// word stays in its slot until the run, on whatever goroutine, has
// returned and frees the slot. So a reader looks at two buckets: two
// lines (and the run of the word it finds).
//
// When the runs out would fill more than half of the table, or both
// buckets of a word are full, the shard goroutine makes a larger table
// (replaceRuns) and publishes there; the old table stays linked behind
// the new (older) while runs published in it are in flight, and readers
// look at every table of the chain, the newest first: during a burst,
// one per doubling of the runs in flight. The shard goroutine unlinks an
// older table once every run published in it has given its execRun back
// (collectRuns, when it takes them back), and, once a burst is over,
// replaces a table much larger than its recent runs need with a smaller
// one (trimRuns). So a CancelWait looks at two buckets per table (one
// table in steady state) however many runs were ever made, and a
// hand-over costs O(1): growth is amortized, and the execRuns are pooled.
//
// Reader's order: a table is published before any word goes in it, and a
// word before the CAS that fires its timer: a reader that saw the timer
// end loads the chain after, and finds the run while it is in flight. A
// slot's word is 0 or a run's, stored after the slot's run; a reader that
// finds its word loads the slot's run and that run's g after: g is 0 or
// the token of the goroutine running that task, since a run's g is cleared
// before its word, and set only by the goroutine that runs its task. (A
// slot reused meanwhile names another run, which cannot be the caller's:
// the caller, inside its own run, keeps that run's word in place.)
type runTable struct {
	words []atomic.Uint64           // per slot: the run word of the run holding it, 0 when free
	runs  []atomic.Pointer[execRun] // per slot: the run that published its word there
	shift uint                      // 64 - log2 of the buckets: bucketsOf keeps the top bits of the hash
	older atomic.Pointer[runTable]
	// live counts the runs published here whose execRun the shard
	// goroutine has not taken back yet (collectRuns): 0 means no word
	// is left in the table, whose slots are freed before the execRun is
	// given back. The shard goroutine's.
	live int
}

const (
	// runBucket is the slots of a bucket: a cache line of words.
	runBucket = 8
	// runMinBuckets is the buckets of the first table.
	runMinBuckets = 4
	// runKeepMin is the idle execRuns a shard keeps whatever its recent
	// runs, and keeps a table for (trimRuns).
	runKeepMin = 64
)

// newRunTable returns an empty table of buckets buckets, a power of two.
func newRunTable(buckets int) *runTable {
	return &runTable{
		words: make([]atomic.Uint64, buckets*runBucket),
		runs:  make([]atomic.Pointer[execRun], buckets*runBucket),
		shift: uint(64 - bits.TrailingZeros(uint(buckets))),
	}
}

// buckets returns the table's number of buckets.
func (t *runTable) buckets() int { return len(t.words) / runBucket }

// bucketsOf returns the first slots of the two buckets that may hold
// word: the top bits of two multiplicative hashes, which spread the node
// indices and generations a word is made of. They may be the same.
func (t *runTable) bucketsOf(word uint64) (a, b int) {
	return int((word*0x9e3779b97f4a7c15)>>t.shift) * runBucket,
		int((word*0xc2b2ae3d27d4eb4f)>>t.shift) * runBucket
}

// free returns the free slots of the bucket starting at slot b, counting
// no further than enough, and the first of them.
func (t *runTable) free(b, enough int) (n, first int) {
	for i := b; i < b+runBucket && n < enough; i++ {
		if t.words[i].Load() == 0 {
			if n == 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// has reports whether the bucket starting at slot b holds word, and
// whether me is the token of the goroutine running its task.
func (t *runTable) has(b int, word uint64, me uintptr) (found, self bool) {
	for i := b; i < b+runBucket; i++ {
		if t.words[i].Load() == word {
			found = true
			x := t.runs[i].Load()
			self = self || x.g.Load() == me || x.queuedBehind(me)
		}
	}
	return found, self
}

// runBucketsFor returns the buckets of a table for n runs in flight: n
// fill a quarter of its slots, far from the 70% at which buckets
// overflow; at least runMinBuckets.
func runBucketsFor(n int) int {
	return max(runMinBuckets, 1<<bits.Len(uint(max(n/2, 1)-1)))
}

// runPool is the shard goroutine's side of the execRuns: the idle ones it
// holds (spare, idle of them, taken from those runs gave back on
// sh.runFree) and the accounting that decides how many it keeps. The
// shard goroutine's.
type runPool struct {
	spare *execRun
	idle  int // execRuns on spare
	made  int // execRuns alive: in flight, on runFree or spare
	// peak is the most execRuns out of spare at once since the last
	// trim, and prev the same for the window before: trimRuns keeps
	// enough for either.
	peak, prev int
	// trimAt is the tick at which trimRuns next looks, and wake asks plan
	// to wake for it: there is something it may give back.
	trimAt uint64
	wake   bool
}

// collectRuns takes the execRuns runs gave back onto the spare list, and
// unlinks the older run tables that no run is published in any more.
// Shard goroutine.
func (sh *Shard) collectRuns() {
	sh.assertGoroutine()
	emptied := false
	sh.wrote(lineExecutor)
	for r := sh.runFree.Swap(nil); r != nil; {
		next := r.next
		r.tab.live--
		emptied = emptied || r.tab.live == 0
		r.tab, r.next, sh.runs.spare = nil, sh.runs.spare, r
		r.task = Task{} // the closure may be collected
		sh.runs.idle++
		r = next
	}
	if emptied {
		sh.pruneRuns()
	}
}

// pruneRuns unlinks the older run tables that no run is published in. A
// reader that has reached one goes on through its older link, which stays
// as it was. Shard goroutine.
func (sh *Shard) pruneRuns() {
	for t := sh.runTab.Load(); t != nil; {
		o := t.older.Load()
		for o != nil && o.live == 0 {
			o = o.older.Load()
		}
		t.older.Store(o)
		t = o
	}
}

// takeRun returns an idle execRun: from the spares, else from those that
// runs gave back, else a new one. Shard goroutine.
func (sh *Shard) takeRun() *execRun {
	sh.assertGoroutine()
	p := &sh.runs
	if p.spare == nil {
		sh.collectRuns()
	}
	r := p.spare
	if r != nil {
		p.spare, r.next = r.next, nil
		p.idle--
	} else {
		r = &execRun{sh: sh}
		r.do = r.exec
		p.made++
	}
	p.peak = max(p.peak, p.made-p.idle)
	return r
}

// publishRun publishes r's run word in the run table: in its first
// bucket while that is at most half full, else in the freer of its two
// (which balances them about as well as always taking the freer, and
// reads one bucket, not two, in a table that is mostly empty). It makes a
// larger table first when the runs out of the pool (in flight, or given
// back and not collected yet) would fill more than half of this one, and
// when both buckets are full. Shard goroutine.
func (sh *Shard) publishRun(r *execRun, word uint64) {
	t := sh.runTab.Load()
	if out := sh.runs.made - sh.runs.idle; t == nil || 2*out > len(t.words) {
		t = sh.replaceRuns(t, runBucketsFor(out))
	}
	for {
		a, b := t.bucketsOf(word)
		na, ia := t.free(a, runBucket/2)
		if na < runBucket/2 {
			if nb, ib := t.free(b, runBucket); nb > na {
				na, ia = nb, ib
			}
		}
		if na > 0 {
			t.runs[ia].Store(r) // before the word: a reader that finds it finds its run
			t.words[ia].Store(word)
			t.live++
			r.tab, r.slot = t, ia
			return
		}
		t = sh.replaceRuns(t, 2*t.buckets())
	}
}

// replaceRuns publishes a new, empty table of buckets buckets in front of
// t, the current one, which stays linked behind it, and returns it.
// Shard goroutine.
func (sh *Shard) replaceRuns(t *runTable, buckets int) *runTable {
	nt := newRunTable(buckets)
	nt.older.Store(t)
	sh.wrote(lineExecutor)
	sh.runTab.Store(nt) // after older: a reader that finds nt finds t
	return nt
}

// trimRuns gives back what a burst of hand-overs left, once a second of
// ticks (sweepCheck): the idle execRuns beyond what the last two windows
// needed at once (and runKeepMin), the tables nothing is published in any
// more (collectRuns), and a table far larger than those runs need, which
// it replaces with one that fits. In steady state it gives back nothing,
// so runs allocate nothing; after a burst its memory comes back within
// three windows of its last run returning, plan waking the shard
// goroutine for them (wake). The shard goroutine, in its pass.
func (sh *Shard) trimRuns() {
	sh.assertGoroutine()
	p, e := &sh.runs, sh.h.w.elapsed
	if p.made == 0 || e < p.trimAt {
		return
	}
	p.trimAt = e + sh.sweepCheck
	sh.collectRuns()
	keep := max(runKeepMin, p.peak, p.prev)
	for p.made > keep && p.spare != nil {
		p.spare = p.spare.next // to the collector
		p.made--
		p.idle--
	}
	p.prev, p.peak = p.peak, p.made-p.idle
	t := sh.runTab.Load()
	if want := runBucketsFor(keep); t.buckets() > 2*want {
		t = sh.replaceRuns(t, want)
		sh.pruneRuns()
	}
	p.wake = p.made > runKeepMin || t.older.Load() != nil || t.buckets() > 2*runBucketsFor(runKeepMin)
}

// RunsInFlight reports whether a run the shard handed out has not returned:
// its word is still in a run table (a queued run's too: its word goes in
// before its timer fires). Any goroutine: exact once the shard goroutine
// has stopped (Stopped), since only that goroutine publishes runs; O(size
// of the tables), for Shutdown.
func (sh *Shard) RunsInFlight() bool {
	for t := sh.runTab.Load(); t != nil; t = t.older.Load() {
		for i := range t.words {
			if t.words[i].Load() != 0 {
				return true
			}
		}
	}
	return false
}
