package shardwheel

// LiveSchedulers returns the number of Schedulers made by New and not yet
// stopped, and RearmLiveWarning lets the next New beyond WarnSchedulers
// warn again: the warning is once per process, and tests need to see it.
func LiveSchedulers() int64 { return liveSchedulers.Load() }

func RearmLiveWarning() { warnedLive.Store(false) }
