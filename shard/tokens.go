package shard

// Pending tokens, which enforce WithMaxPending (Config.Limited; without a
// limit the shard keeps none and counts pending timers from its counters).
// A shard's share of the limit is spread over its lanes: Schedule takes a
// token from its own lane, and whoever ends a timer (Cancel, the shard
// goroutine, Stop) gives one back to the lane of the P it runs on. A lane
// that runs dry steals from the shard's other lanes, and a shard that runs
// dry takes tokens from other shards (TakeTokens), so the limit needs no
// global counter and costs two atomic adds per timer, on lines of the
// caller's P.
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
		if l.tokens.Add(-1) >= 0 {
			return true
		}
		l.tokens.Add(1)
		if sh.dry.Load() || !sh.stealInto(l) {
			return false
		}
	}
}

// releaseToken gives one pending token back, to the lane of the caller's P, if
// the shard keeps tokens.
func (sh *Shard) releaseToken() {
	if sh.cfg.Limited {
		p := procPin()
		sh.giveBack(&sh.lanes[p&sh.laneMask])
		procUnpin()
	}
}

// giveBack returns one pending token to lane l, then clears Dry: in that
// order, so that a Schedule that sees Dry clear can find the token.
func (sh *Shard) giveBack(l *lane) {
	l.tokens.Add(1)
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
			q := src.tokens.Load()
			if q <= 0 {
				break
			}
			take := (q + 1) / 2
			if src.tokens.CompareAndSwap(q, q-take) {
				dst.tokens.Add(take)
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
	p := procPin()
	defer procUnpin()
	return src.stealInto(&sh.lanes[p&sh.laneMask])
}
