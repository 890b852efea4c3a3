package profiling_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/profiling"
)

// Charts stay well-formed SVG without NaN or Inf for any data: none, a
// single point, all zeros, non-finite values, a degenerate x range, and a
// reference line far above the data.
func TestChartEdgeCases(t *testing.T) {
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
		})
	}
}
