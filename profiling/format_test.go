package profiling_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/profiling"
)

func TestFmtDur(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{1, "1ns"},
		{850, "850ns"},
		{999, "999ns"},
		{1000, "1µs"},
		{12345, "12.3µs"},
		{150 * time.Microsecond, "150µs"},
		{999_700, "1ms"}, // rounds up into the next unit, not "1000µs"
		{time.Millisecond, "1ms"},
		{1_050_000, "1.05ms"},
		{1_500_000, "1.5ms"},
		{2500 * time.Millisecond, "2.5s"},
		{20 * time.Minute, "1200s"},
	} {
		assert.Equal(t, c.want, profiling.FmtDur(c.d), "%d", int64(c.d))
	}
}

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
