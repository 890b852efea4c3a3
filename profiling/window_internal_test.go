package profiling

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRecent returns a recent on a fake clock whose snapshots count the
// calls to Stats in Total.Fired, so that a window's count says which
// snapshot it started at.
func fakeRecent() (r *recent, advance func(time.Duration)) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	calls := uint64(0)
	stats := func() stats.Stats {
		calls++
		return stats.Stats{Total: stats.Shard{Fired: calls}}
	}
	r = newRecent(stats, time.Millisecond, func() time.Time { return now })
	return r, func(d time.Duration) { now = now.Add(d) }
}

// The kept snapshots stay few, whatever the request rate, and still give
// every window within a quarter of its length (or the spacing of the
// requests): the memory bound and precision the Handler documents.
func TestRecentBounds(t *testing.T) {
	t.Parallel()
	windows := []time.Duration{MinWindow, 3 * time.Second, DefaultWindow, 30 * time.Second, time.Minute, 2 * time.Minute, MaxWindow}
	for _, every := range []time.Duration{100 * time.Millisecond, time.Second, 1500 * time.Millisecond, defaultRefresh, 15 * time.Second} {
		t.Run(fmt.Sprint(every), func(t *testing.T) {
			t.Parallel()
			r, advance := fakeRecent()
			most := 0
			// Past keepFor, the kept snapshots are at their steady state.
			for i := 0; i < int((keepFor+MaxWindow/4)/every); i++ {
				advance(every)
				w := windows[i%len(windows)]
				o := r.observe(w)
				most = max(most, len(r.snaps))
				require.LessOrEqual(t, len(r.history), int(MaxWindow/snapSpacing)+1)
				if time.Duration(i+1)*every < MaxWindow+every {
					continue // not enough history yet for every window
				}
				slack := max(w/4, every, snapSpacing)
				assert.InDelta(t, float64(w), float64(o.window()), float64(slack), "window %v at request %d", w, i)
			}
			assert.LessOrEqual(t, most, maxKept, "snapshots kept at once")
			t.Logf("every %v: at most %d snapshots kept", every, most)
		})
	}
}

// maxKept is the most snapshots a recent keeps, which HandlerWith's
// documentation states as its memory bound.
const maxKept = 24

// A window shorter than asked for is what the snapshots allow: the first
// request's starts at the handler's creation.
func TestRecentFirstRequest(t *testing.T) {
	t.Parallel()
	r, advance := fakeRecent()
	advance(3 * time.Second)
	o := r.observe(DefaultWindow)
	assert.Equal(t, 3*time.Second, o.window())
	assert.EqualValues(t, 1, o.base.st.Total.Fired, "the creation snapshot")
	require.Equal(t, 1, len(o.history))
	assert.Equal(t, 3*time.Second, o.history[0].Span)

	// A request within snapSpacing of the last kept snapshot is not kept.
	advance(snapSpacing / 2)
	r.observe(DefaultWindow)
	assert.Equal(t, 2, len(r.snaps))
}

// After a pause longer than the charts reach, the first interval is left
// out of the history, and release drops what no window needs.
func TestRecentPauseAndRelease(t *testing.T) {
	t.Parallel()
	r, advance := fakeRecent()
	for range 30 {
		advance(time.Second)
		r.observe(DefaultWindow)
	}
	require.Equal(t, 30, len(r.history))
	advance(keepFor + time.Second)
	o := r.observe(DefaultWindow)
	assert.Equal(t, keepFor+time.Second, o.window(), "the newest snapshot before the pause")
	assert.Empty(t, o.history, "an interval longer than the charts reach is left out, and the rest is too old")
	assert.Equal(t, 1, len(r.snaps), "only the new snapshot is young enough for a window")

	for range 10 {
		advance(time.Second)
		r.observe(DefaultWindow)
	}
	kept := len(r.snaps)
	r.release()
	assert.Equal(t, kept, len(r.snaps), "a request came within keepFor: nothing is dropped")
	advance(keepFor)
	r.release()
	assert.Equal(t, 1, len(r.snaps))
	assert.Empty(t, r.history)
	assert.EqualValues(t, 42, r.snaps[0].st.Total.Fired, "the newest is kept: the creation's, 41 requests'")
}
