package shardwheel

// IndexLen returns the number of entries in s's key indexes, stale ones
// included: tests poll it to see entries go away.
func IndexLen(s *Scheduler) int {
	n := 0
	for i := range s.index {
		n += s.index[i].m.Size()
	}
	return n
}
