package profiling

import "github.com/shardwheel/shardwheel/internal/units"

// DurationChartSVG renders a duration chart with one line per series
// (points as {seconds, nanoseconds}) and a reference line at refY
// nanoseconds, so that tests can feed it edge cases.
func DurationChartSVG(xMax, refY float64, series ...[][2]float64) string {
	c := chart{
		title: "test", xMax: xMax, xTicks: secondsTicks(xMax), yKind: yDuration,
		refs: []ref{{"ref", refY}}, fmtX: units.Sig,
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
