package profiling

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
)

// HandlerAt is HandlerWith with the clock now, which stamps the
// snapshots the handler keeps.
func HandlerAt(s *shardwheel.Scheduler, opts Options, now func() time.Time) http.Handler {
	return newHandler(s, withClock(opts, now))
}

// Reading is a Stats snapshot with a reading of the process and the
// host, as Capture takes each.
type Reading = snapshot

// StatsOf returns the Stats snapshot of r.
func StatsOf(r Reading) stats.Stats { return r.st }

// Take returns a Reading of s, now.
func Take(s *shardwheel.Scheduler) Reading { return take(s.Stats) }

// Diagnose returns the diagnosis Capture would write (Report.Diagnosis)
// had it taken the readings snaps, the first at its start, of a scheduler
// with the given tick, and the causes of each spike, most time lost
// first.
func Diagnose(tick time.Duration, snaps []Reading) (lines []string, causes [][]string) {
	first, last := snaps[0], snaps[len(snaps)-1]
	r := &recording{
		cfg:  CaptureConfig{Duration: last.at.Sub(first.at), Interval: snaps[1].at.Sub(first.at)},
		tick: tick, shards: len(first.st.Shards), start: first.at, elapsed: last.at.Sub(first.at),
		first: first, last: last,
	}
	for i := 1; i < len(snaps); i++ {
		r.samples = append(r.samples, newSample(snaps[i], snaps[i-1], snaps[i].at.Sub(first.at), tick))
	}
	sm := r.summary()
	for _, sp := range sm.spikes {
		var c []string
		for _, x := range sp.causes {
			c = append(c, string(x))
		}
		causes = append(causes, c)
	}
	return sm.diagnosis(), causes
}

// ChartSpec describes a chart for ChartSVG.
type ChartSpec struct {
	Title  string
	XMax   float64
	Lines  map[string][][2]float64 // name: {seconds, nanoseconds} points
	Refs   map[string]float64      // label: nanoseconds
	Spikes [][2]float64            // shaded x ranges
}

// ChartSVG renders a duration chart over time from c, its lines and
// references in the order of their names.
func ChartSVG(c ChartSpec) string {
	ch := chart{
		title: c.Title, xLabel: "time (s)", xMax: c.XMax, xTicks: secondsTicks(c.XMax),
		yLabel: "latency", yKind: yDuration, fmtX: units.Sig,
	}
	colors := []string{colorP50, colorP99, colorMax, colorFired, colorCancelled}
	i := 0
	for _, name := range slices.Sorted(maps.Keys(c.Lines)) {
		l := line{name: name, color: colors[i%len(colors)]}
		for _, p := range c.Lines[name] {
			l.pts = append(l.pts, point{p[0], p[1]})
		}
		ch.lines = append(ch.lines, l)
		i++
	}
	for _, label := range slices.Sorted(maps.Keys(c.Refs)) {
		ch.refs = append(ch.refs, ref{label, c.Refs[label], ""})
	}
	for _, s := range c.Spikes {
		ch.bands = append(ch.bands, band{s[0], s[1], "spike"})
	}
	return ch.svg()
}

// DurationChartSVG renders a duration chart with one line per series
// (points as {seconds, nanoseconds}) and a reference line at refY
// nanoseconds, so that tests can feed it edge cases.
func DurationChartSVG(xMax, refY float64, series ...[][2]float64) string {
	c := chart{
		title: "test", xLabel: "time (s)", xMax: xMax, xTicks: secondsTicks(xMax), yLabel: "latency", yKind: yDuration,
		refs: []ref{{"ref", refY, ""}}, fmtX: units.Sig,
	}
	for _, s := range series {
		l := line{name: "l", color: "#000"}
		for _, p := range s {
			l.pts = append(l.pts, point{p[0], p[1]})
		}
		c.lines = append(c.lines, l)
	}
	return c.svg()
}
