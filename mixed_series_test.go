package shardwheel_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel"
)

// The mixed load's series (Every, of closures and Handlers, with and
// without ByKey, under each OnMissed policy): what the oracle knows of
// each, and the checks of their runs and ends.

// mixedSeries is one series of the mixed load.
type mixedSeries struct {
	id     int
	kind   string
	handle shardwheel.Timer
	start  int64 // the oracle's clock before the Every call
	period time.Duration
	ready  atomic.Bool
	inRun  atomic.Bool
	runs   atomic.Int32
	// ended counts the Cancels and CancelWaits that returned true; after
	// the first, at most after more runs may start (1 after a Cancel, a
	// run already begun; 0 after a CancelWait).
	ended   atomic.Int32
	after   int32
	frozen  atomic.Int32 // runs when the ending call returned
	lastEnd atomic.Int64 // the oracle's clock as its last run returned
	stopped bool
	indexed bool // an Index's (mixedWorker.ix), under its key
	key     uint64
}

// runSeries is a run of series m: the k-th starts no earlier than k
// periods after the call, never while the previous one runs.
func (o *mixedOracle) runSeries(m *mixedSeries) {
	now := o.now()
	for !m.ready.Load() {
		runtime.Gosched() // its Every has not returned yet
	}
	if !m.inRun.CompareAndSwap(false, true) {
		o.fail("series %d (%s): two runs at once", m.id, m.kind)
		return
	}
	defer func() {
		m.lastEnd.Store(o.now())
		m.inRun.Store(false)
	}()
	k := m.runs.Add(1)
	if b := m.start + int64(k)*int64(m.period); now < b {
		o.fail("series %d (%s): run %d %v before its grid point", m.id, m.kind, k, time.Duration(b-now))
	}
}

// series starts a series of a random kind, and ends some of the worker's
// older ones.
func (mw *mixedWorker) series() {
	o := mw.o
	m := &mixedSeries{id: int(mw.nextID.Add(1)), start: o.now()}
	m.period = time.Duration(1+mw.rng.IntN(5)) * time.Millisecond
	key := uint64(m.id) | 1<<61
	m.key = key
	policy := shardwheel.MissedPolicy(mw.rng.IntN(3))
	opts := []shardwheel.TimerOption{shardwheel.OnMissed(policy)}
	m.kind = "Every, " + policy.String()
	if mw.rng.IntN(2) == 0 {
		opts = append(opts, shardwheel.ByKey(key))
		m.kind += ", ByKey"
	}
	var err error
	switch mw.rng.IntN(4) {
	case 3: // a plan of fixed steps: the grid's checks hold for it
		m.kind = strings.Replace(m.kind, "Every, "+policy.String(), "OnPlan", 1)
		opts = opts[1:] // no OnMissed: a plan chooses its own points
		period := m.period
		m.handle, err = mw.s.OnPlan(planFunc(func(prev time.Time) time.Time { return prev.Add(period) }),
			func() { o.runSeries(m) }, opts...)
	case 0:
		m.kind = "Handler." + m.kind
		o.seriesByKey.Store(key, m)
		m.handle, err = mw.hs.Every(key, m.period, opts...)
	case 1:
		m.kind, m.indexed = "Index."+m.kind, true
		m.handle, err = mw.ix.Every(key, m.period, func() { o.runSeries(m) }, opts...)
	default:
		m.handle, err = mw.s.Every(m.period, func() { o.runSeries(m) }, opts...)
	}
	if err != nil {
		o.fail("%s: %v", m.kind, err)
		return
	}
	m.ready.Store(true)
	o.series.Store(m.handle, m)
	mw.live = append(mw.live, m)
	if len(mw.live) > 8 { // end the oldest
		mw.endSeries(mw.live[0], mw.rng.IntN(2) == 0)
		mw.ended = append(mw.ended[max(len(mw.ended)-7, 0):], mw.live[0])
		mw.live = mw.live[1:]
	}
	mw.resetEnded()
}

// resetEnded may Reset a series the worker ended, which must fail: the
// stale handle's Reset races the reuse of the series' record by other
// series. (A live series' Reset is not drawn: it restarts the grid that
// the runs' bounds count on.)
func (mw *mixedWorker) resetEnded() {
	if len(mw.ended) == 0 || mw.rng.IntN(2) == 0 {
		return
	}
	m := mw.ended[mw.rng.IntN(len(mw.ended))]
	if m.handle.Reset(m.period) {
		mw.o.fail("series %d (%s): Reset returned true after the series ended", m.id, m.kind)
	}
}

// endSeries ends series m with CancelWait, or with Cancel (an Index's by
// its key), and remembers how many runs it had then.
func (mw *mixedWorker) endSeries(m *mixedSeries, wait bool) {
	var ok bool
	if wait {
		var err error
		if ok, err = m.handle.CancelWait(context.Background()); err != nil {
			mw.o.fail("series %d (%s): CancelWait: %v", m.id, m.kind, err)
		}
	} else if m.indexed {
		ok, m.after = mw.ix.Cancel(m.key), 1
	} else {
		ok, m.after = m.handle.Cancel(), 1
	}
	if !ok {
		mw.o.fail("series %d (%s): a live series could not be cancelled", m.id, m.kind)
		return
	}
	m.frozen.Store(m.runs.Load())
	m.ended.Add(1)
}

// checkSeries checks, once Stop (begun at stopAt) has returned, that every
// series ended exactly one way and that no run started after the call
// that ended it returned (but the one a Cancel may leave). A series whose
// run Stop found handed out ends by that run, its last, which Stop waits
// for and does not return: one of its runs returned after Stop began.
func (o *mixedOracle) checkSeries(stopAt int64) {
	o.series.Range(func(_, v any) bool {
		m := v.(*mixedSeries)
		ways := int(m.ended.Load())
		if m.stopped || (ways == 0 && m.lastEnd.Load() >= stopAt) {
			ways++
		}
		if ways != 1 {
			o.fail("series %d (%s) ended %d ways (cancelled %d, stopped %v)", m.id, m.kind, ways, m.ended.Load(), m.stopped)
		}
		if m.ended.Load() > 0 {
			if late := m.runs.Load() - m.frozen.Load(); late > m.after {
				o.fail("series %d (%s): %d runs started after it was cancelled", m.id, m.kind, late)
			}
		}
		return true
	})
}

// seriesCount and seriesRuns are the load's series and their runs, for
// its log.
func (o *mixedOracle) seriesCount() (n int) {
	o.series.Range(func(_, _ any) bool { n++; return true })
	return n
}

func (o *mixedOracle) seriesRuns() (n int64) {
	o.series.Range(func(_, v any) bool { n += int64(v.(*mixedSeries).runs.Load()); return true })
	return n
}
