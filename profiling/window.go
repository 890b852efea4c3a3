package profiling

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/shardwheel/shardwheel/stats"
)

// The bounds of the window the Handler's page and /stats report beside
// the totals, set with ?window=.
const (
	// DefaultWindow is the window of a request without ?window=.
	DefaultWindow = 10 * time.Second
	// MinWindow is the shortest window ?window= accepts: a shard
	// publishes its counters once per pass, so a shorter one would hold
	// too few values.
	MinWindow = time.Second
	// MaxWindow is the longest window ?window= accepts, and how far back
	// the page's charts reach.
	MaxWindow = 5 * time.Minute
)

const (
	// snapSpacing is the least time between two snapshots the Handler
	// keeps: requests closer together share the older one.
	snapSpacing = time.Second
	// thinning sets how the kept snapshots thin out with age: a snapshot
	// goes when its neighbours are at most 1/thinning of the younger's
	// age apart. With 2, at most 24 snapshots are kept whatever the
	// request rate, and a window is within a quarter of the length asked
	// for, or of the requests' spacing when that is more
	// (TestRecentBounds).
	thinning = 2
	// keepFor is the age past which no window needs a snapshot. After
	// keepFor without a request, the Handler drops all but its newest
	// snapshot and its history.
	keepFor = MaxWindow + MaxWindow/4
	// defaultRefresh is how often the HTML page reloads itself unless
	// ?refresh= says otherwise.
	defaultRefresh = 5 * time.Second
	// maxRefresh bounds ?refresh=.
	maxRefresh = time.Hour
)

// snapshot is a Stats snapshot, a reading of the process and the host
// taken with it, and when.
type snapshot struct {
	at   time.Time
	st   stats.Stats
	proc procReading
}

// take returns a snapshot of stats and the process, now.
func take(stats func() stats.Stats) snapshot {
	return snapshot{st: stats(), proc: readProc(), at: time.Now()}
}

// recent keeps the snapshots the Handler's requests took, from which it
// computes windows, and the time series between them, which the page
// charts. It starts no goroutine: requests add snapshots, and a timer
// (time.AfterFunc, which runs nothing until it fires) releases them once
// requests have stopped for keepFor.
type recent struct {
	stats func() stats.Stats
	now   func() time.Time
	tick  time.Duration // the Scheduler's, for the samples' lost time

	mu      sync.Mutex
	snaps   []snapshot // oldest first; never empty
	history []sample   // one per interval between kept snapshots, oldest first
	last    time.Time  // the latest request
	idle    *time.Timer
}

// newRecent returns a recent of a Scheduler with the given tick, holding
// one snapshot, taken now.
func newRecent(stats func() stats.Stats, tick time.Duration, now func() time.Time) *recent {
	st, proc := stats(), readProc()
	return &recent{stats: stats, now: now, tick: tick, snaps: []snapshot{{now(), st, proc}}}
}

// observation is what one request sees: the current snapshot, the one
// its window starts at, and the history to chart.
type observation struct {
	cur, base snapshot
	history   []sample
	kept      int // snapshots held after this request
}

// window returns the observation's window length.
func (o *observation) window() time.Duration { return o.cur.at.Sub(o.base.at) }

// observe takes a snapshot, returns the window of about the length asked
// for that ends with it, and keeps the snapshot for later windows.
func (r *recent) observe(window time.Duration) observation {
	st, proc := r.stats(), readProc()
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	o := observation{cur: snapshot{now, st, proc}, base: r.pick(now, window)}
	r.keep(o.cur)
	r.last = now
	if r.idle == nil {
		r.idle = time.AfterFunc(keepFor, r.release)
	} else {
		r.idle.Reset(keepFor)
	}
	o.history = slices.Clone(r.history)
	o.kept = len(r.snaps)
	return o
}

// pick returns the kept snapshot whose age is nearest window, on a log
// scale (so that half the length is as far as double), the older of two
// equally near. It returns the oldest when none is older than now.
func (r *recent) pick(now time.Time, window time.Duration) snapshot {
	best, bestDist := r.snaps[0], math.Inf(1)
	for _, s := range r.snaps {
		age := now.Sub(s.at)
		if age <= 0 {
			continue
		}
		if d := math.Abs(math.Log(float64(age) / float64(window))); d < bestDist {
			best, bestDist = s, d
		}
	}
	return best
}

// keep adds cur, unless the newest kept snapshot is less than
// snapSpacing older, and the interval since that one to the history; then
// it drops what no window needs.
func (r *recent) keep(cur snapshot) {
	newest := r.snaps[len(r.snaps)-1]
	gap := cur.at.Sub(newest.at)
	if gap < snapSpacing {
		return
	}
	// An interval longer than the charts' reach (requests stopped for a
	// while) would be one point standing for all of it: leave it out.
	if gap <= MaxWindow {
		r.history = append(r.history, newSample(cur, newest, 0, r.tick))
	}
	cut := 0
	for cut < len(r.history) && cur.at.Sub(r.history[cut].end) > MaxWindow {
		cut++
	}
	r.history = slices.Delete(r.history, 0, cut)
	r.snaps = append(r.snaps, cur)
	r.thin(cur.at)
}

// thin drops the snapshots older than keepFor, but the newest, and those
// whose neighbours are close enough, for their age, to stand in for them.
func (r *recent) thin(now time.Time) {
	old := 0
	for old < len(r.snaps)-1 && now.Sub(r.snaps[old].at) > keepFor {
		old++
	}
	r.snaps = slices.Delete(r.snaps, 0, old)
	for i := len(r.snaps) - 2; i >= 1; i-- {
		newer, older := r.snaps[i+1], r.snaps[i-1]
		if newer.at.Sub(older.at) <= max(snapSpacing, now.Sub(newer.at)/thinning) {
			r.snaps = slices.Delete(r.snaps, i, i+1)
		}
	}
}

// release drops all but the newest snapshot, and the history, if no
// request came for keepFor: the windows they served are over.
func (r *recent) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Sub(r.last) < keepFor {
		return // a request came since the timer was set
	}
	r.snaps = []snapshot{r.snaps[len(r.snaps)-1]}
	r.history = nil
}

// parseWindow returns the ?window= of q: DefaultWindow when absent, else a
// Go duration in [MinWindow, MaxWindow].
func parseWindow(q url.Values) (time.Duration, error) {
	return durationParam(q, "window", DefaultWindow, MinWindow, MaxWindow, false)
}

// parseRefresh returns the ?refresh= of q in whole seconds:
// defaultRefresh when absent, 0 for "0" (no reloading), else a Go
// duration in [1s, maxRefresh], rounded to the second.
func parseRefresh(q url.Values) (time.Duration, error) {
	d, err := durationParam(q, "refresh", defaultRefresh, time.Second, maxRefresh, true)
	return d.Round(time.Second), err
}

// durationParam parses the query parameter name of q as a Go duration in
// [lo, hi] (or 0 if zero is allowed), def when absent.
func durationParam(q url.Values, name string, def, lo, hi time.Duration, zero bool) (time.Duration, error) {
	vs, ok := q[name]
	if !ok {
		return def, nil
	}
	bounds := fmt.Sprintf("from %s to %s", fmtBound(lo), fmtBound(hi))
	if zero {
		bounds = "0 (off) or " + bounds
	}
	if len(vs) > 1 {
		return 0, fmt.Errorf("%s is given %d times: give it once, a Go duration %s", name, len(vs), bounds)
	}
	d, err := time.ParseDuration(vs[0])
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s=%q is not a Go duration such as 10s, 90s or 2m30s: want %s", name, vs[0], bounds)
	case d == 0 && zero:
		return 0, nil
	case d < lo || d > hi:
		return 0, fmt.Errorf("%s=%s is out of range: want %s", name, vs[0], bounds)
	}
	return d, nil
}

// fmtBound prints a bound of a query parameter as a Go duration without
// zero units: 5m, not 5m0s.
func fmtBound(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if len(s) > len(z) && s[len(s)-len(z):] == z {
			s = s[:len(s)-len(z)+1]
		}
	}
	return s
}
