package shard

// Pending tokens. A shard's share of the WithMaxPending limit is spread over
// its lanes: Schedule takes a token from its own lane, and whoever ends a
// timer (Cancel, the worker, Drain) gives one back to the lane of the P it
// runs on. A lane that runs dry steals from the shard's other lanes, and a
// shard that runs dry takes tokens from other shards (TakeTokens), so the
// limit needs no global counter and costs nothing until it is near.
//
// At the limit a rejection would scan every lane of every shard. Instead,
// the scan that finds nothing sets the scheduler-wide Dry flag, and a
// Schedule that runs out of local tokens while Dry is set fails at once:
// rejection costs O(1), exactly when the system is overloaded. Whoever
// gives a token back clears Dry after adding it, and the scan that sets Dry
// scans once more after setting it (package shardwheel's borrowTokens), so
// with sequentially consistent atomics either that rescan sees the token or
// the giver sees Dry and clears it: a Schedule that starts after giveBack
// has returned finds the token.

// acquire takes a pending token for a Schedule on lane l, stealing from the
// shard's other lanes when l has none.
func (sh *Shard) acquire(l *lane) bool {
	for {
		if l.quota.Add(-1) >= 0 {
			return true
		}
		l.quota.Add(1)
		if sh.dry.Load() || !sh.stealInto(l) {
			return false
		}
	}
}

// release gives one pending token back, to the lane of the caller's P.
func (sh *Shard) release() {
	_, l := sh.myLane()
	sh.giveBack(l)
}

// giveBack returns one pending token to lane l, then clears Dry: in that
// order, so that a Schedule that sees Dry clear can find the token.
func (sh *Shard) giveBack(l *lane) {
	l.quota.Add(1)
	if sh.dry.Load() {
		sh.dry.Store(false)
	}
}

// stealInto moves up to half of the spare tokens of the first lane of sh
// that has any into dst, and reports whether it moved any.
func (sh *Shard) stealInto(dst *lane) bool {
	for i := range sh.lanes {
		src := &sh.lanes[i]
		for {
			q := src.quota.Load()
			if q <= 0 {
				break
			}
			take := (q + 1) / 2
			if src.quota.CompareAndSwap(q, q-take) {
				dst.quota.Add(take)
				return true
			}
		}
	}
	return false
}

// TakeTokens moves spare pending tokens from src into sh, onto the lane of
// the caller's P, and reports whether it moved any. It lets a shard whose
// share of the pending limit is used up borrow another's.
func (sh *Shard) TakeTokens(src *Shard) bool {
	_, l := sh.myLane()
	return src.stealInto(l)
}

// Quota returns the tokens this shard holds now, summed over its lanes.
func (sh *Shard) Quota() int64 {
	var q int64
	for i := range sh.lanes {
		q += sh.lanes[i].quota.Load()
	}
	return q
}
