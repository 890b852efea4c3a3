package profiling_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/profiling"
)

// Charts stay well-formed SVG without NaN or Inf for any data: none, a
// single point, all zeros, non-finite values, a degenerate x range, and a
// reference line far above the data.
func TestChartEdgeCases(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	for name, c := range map[string]struct {
		xMax   float64
		series [][][2]float64
		want   string
	}{
		"no series":   {1, nil, "no samples"},
		"no points":   {1, [][][2]float64{{}}, "no samples"},
		"one point":   {1, [][][2]float64{{{0.5, 2e6}}}, "<circle"},
		"zeros":       {2, [][][2]float64{{{1, 0}, {2, 0}}}, "<path d=\"M"},
		"non-finite":  {1, [][][2]float64{{{nan, 1}, {0.5, inf}, {1, nan}}}, "no samples"},
		"zero x":      {0, [][][2]float64{{{0, 5}}}, "<circle"},
		"nan x range": {nan, [][][2]float64{{{0, 5}}}, "<circle"},
		"ref above":   {1, [][][2]float64{{{0, 100}, {1, 200}}}, "is above this range"},
	} {
		t.Run(name, func(t *testing.T) {
			svg := profiling.DurationChartSVG(c.xMax, 1e9, c.series...)
			assert.Equal(t, 1, requireDrawable(t, svg))
			assert.Contains(t, svg, c.want)
			assert.True(t, strings.HasPrefix(svg, "<svg"))
			requireReadable(t, svg, false)
		})
	}
}

// Labels make room for each other and stay off the data: reference
// lines are named in the legend, whatever data runs along them; two close
// reference lines both have their entry; a legend too wide for the
// title's row wraps, the plot below it; and a note on a reference above
// the range avoids the axis label.
func TestChartLabelsDoNotCollide(t *testing.T) {
	t.Parallel()
	ms := 1e6
	flat := func(y float64, from, to float64) [][2]float64 {
		var pts [][2]float64
		for x := from; x <= to+1e-9; x += 0.25 {
			pts = append(pts, [2]float64{x, y})
		}
		return pts
	}
	for name, c := range map[string]profiling.ChartSpec{
		// The data runs just above the reference line at the right,
		// where its label would go by default.
		"data under the label": {
			Title: "Timer lateness", XMax: 10,
			Lines: map[string][][2]float64{
				"max": append(flat(0.5*ms, 0, 5), flat(2.3*ms, 5.25, 10)...),
				"p50": flat(0.4*ms, 0, 10),
			},
			Refs: map[string]float64{"tick + 1ms slack (2ms)": 2 * ms},
		},
		// Two references 1ms apart on a 40ms axis: 6 pixels.
		"close references": {
			Title: "Pass time", XMax: 15,
			Lines: map[string][][2]float64{"max": {{0, 1 * ms}, {5, 37 * ms}, {10, 3 * ms}, {15, 31 * ms}}},
			Refs:  map[string]float64{"1 tick (1ms)": 1 * ms, "tick + 1ms slack (2ms)": 2 * ms},
		},
		"long title, many series": {
			Title: "Latency distribution: last 5m and since the scheduler started, by percentile", XMax: 4,
			Lines: map[string][][2]float64{
				"lateness, last 5m": {{0, ms}, {4, 9 * ms}}, "lateness, since start": {{0, ms}, {4, 8 * ms}},
				"tick lag, last 5m": {{0, ms}, {4, 7 * ms}}, "tick lag, since start": {{0, ms}, {4, 6 * ms}},
			},
			Refs: map[string]float64{"tick + 1ms slack (2ms)": 2 * ms},
		},
		"references above the range": {
			Title: "Task time", XMax: 60,
			Lines: map[string][][2]float64{"max": {{0, 200}, {30, 500}, {60, 300}}},
			Refs:  map[string]float64{"1 tick (1ms)": ms, "tick + 1ms slack (2ms), a long reference label": 2 * ms},
		},
		"spikes shaded": {
			Title: "Tick lag", XMax: 15,
			Lines:  map[string][][2]float64{"max": {{0, ms}, {8, 31 * ms}, {15, ms}}},
			Refs:   map[string]float64{"tick + 1ms slack (2ms)": 2 * ms},
			Spikes: [][2]float64{{7.75, 8}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			svg := profiling.ChartSVG(c)
			requireDrawable(t, svg)
			requireReadable(t, svg, true)
		})
	}
}

// A line breaks at a gap (a NaN point: an interval without a value, or
// intervals that are not contiguous) instead of drawing across it, and a
// point alone between gaps still shows, as a marker.
func TestChartGaps(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	var many [][2]float64
	for i := range 100 {
		y := 1e6 * float64(i%7+1)
		if i == 50 || i == 52 {
			y = nan // a point alone at 51
		}
		many = append(many, [2]float64{float64(i), y})
	}
	svg := profiling.DurationChartSVG(100, 1e9, many)
	requireDrawable(t, svg)
	c := requireReadable(t, svg, true)
	require.Len(t, c.series, 3, "three runs: before the gap, the point alone, after")
	assert.Len(t, c.series[0], 50)
	assert.Len(t, c.series[1], 1)
	assert.Len(t, c.series[2], 47)
	assert.Equal(t, 1, strings.Count(svg, "<circle"), "more than 60 points get no markers, but the one alone")
}
