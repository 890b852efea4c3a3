package profiling

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Chart geometry, in SVG user units; the page scales the chart to its
// width. The left margin fits tick labels like "12.5k".
const (
	chartW     = 960
	chartH     = 300
	padLeft    = 66
	padRight   = 24
	padTop     = 48
	padBottom  = 46
	plotW      = chartW - padLeft - padRight
	plotH      = chartH - padTop - padBottom
	maxMarkers = 60 // lines with more points get no markers
)

// yKind says what a chart's y values are, which picks its units.
type yKind int

const (
	yDuration yKind = iota // nanoseconds
	yRate                  // per second
	yCount
)

// point is one data point, in the chart's x unit and raw y unit.
type point struct{ x, y float64 }

// line is one series of a chart.
type line struct {
	name  string
	color string
	dash  string // stroke-dasharray; "" draws a solid line
	pts   []point
}

// ref is a horizontal reference line, such as one tick.
type ref struct {
	label string
	y     float64
}

// tickMark is an axis tick at v, labelled label.
type tickMark struct {
	v     float64
	label string
}

// chart is a line chart rendered to inline SVG by svg. The x range is
// fixed by the caller ([0, xMax] with xTicks); the y range starts at 0 and
// fits the data, so a chart of zeros, or of no points, still has axes.
type chart struct {
	title  string
	xLabel string
	xMax   float64
	xTicks []tickMark
	yLabel string // the unit is appended
	yKind  yKind
	lines  []line
	refs   []ref
	// fmtX labels a marker's tooltip with a point's x value.
	fmtX func(float64) string
}

// finite reports whether v can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// niceStep returns a 1, 2 or 5 times a power of ten step that splits
// [0, top] into at most n intervals. top must be > 0.
func niceStep(top float64, n int) float64 {
	raw := top / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks returns ticks from 0 to the first multiple of a nice step at
// or above top (1 if top is not a positive number), labelled by label.
func linearTicks(top float64, n int, label func(v, step float64) string) []tickMark {
	if !(top > 0) || !finite(top) {
		top = 1
	}
	step := niceStep(top, n)
	k := math.Ceil(top/step - 1e-9) // don't add a step for rounding noise
	ticks := make([]tickMark, 0, int(k)+1)
	for i := 0.0; i <= k; i++ {
		ticks = append(ticks, tickMark{i * step, label(i*step, step)})
	}
	return ticks
}

// fmtStep prints v with as many decimals as step needs.
func fmtStep(v, step float64) string {
	return strconv.FormatFloat(v, 'f', max(0, int(-math.Floor(math.Log10(step)+1e-9))), 64)
}

// secondsTicks returns ticks for an x axis of seconds from 0 to xMax.
func secondsTicks(xMax float64) []tickMark {
	return linearTicks(xMax, 10, func(v, _ float64) string { return units.Sig(v) + "s" })
}

// scale returns the unit and divisor of y values up to top.
func (k yKind) scale(top float64) (unit string, div float64) {
	switch k {
	case yDuration:
		return units.DurationUnit(top)
	case yRate:
		unit, div = units.SIUnit(top)
		return unit + "/s", div
	}
	return units.SIUnit(top)
}

// floor is the y range drawn when all values are 0: 1µs, 1/s or 1.
func (k yKind) floor() float64 {
	if k == yDuration {
		return 1e3
	}
	return 1
}

// fmtY prints a raw y value for a tooltip.
func (k yKind) fmtY(v float64) string {
	switch k {
	case yDuration:
		return units.Duration(time.Duration(v))
	case yRate:
		return units.Rate(v)
	}
	return units.SI(v)
}

// svg renders the chart. The result is well-formed XML whatever the data:
// non-finite values are skipped and empty ranges get a default size.
func (c *chart) svg() string {
	top := 0.0
	npts := 0
	for _, l := range c.lines {
		for _, p := range l.pts {
			if finite(p.x) && finite(p.y) {
				top = max(top, p.y)
				npts++
			}
		}
	}
	if top <= 0 {
		top = c.yKind.floor()
	}
	unit, div := c.yKind.scale(top)
	yTicks := linearTicks(top/div, 5, fmtStep)
	yTop := yTicks[len(yTicks)-1].v * div // raw value at the top of the plot
	xMax := c.xMax
	if !(xMax > 0) || !finite(xMax) {
		xMax = 1
	}
	px := func(x float64) float64 { return padLeft + min(max(x/xMax, 0), 1)*plotW }
	py := func(y float64) float64 { return padTop + plotH - min(max(y/yTop, 0), 1)*plotH }

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" class="chart">`,
		chartW, chartH, esc(c.title))
	w(`<text x="%d" y="20" class="title">%s</text>`, padLeft, esc(c.title))

	// Grid, axes and tick labels.
	for _, t := range yTicks {
		y := py(t.v * div)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, padLeft, y, chartW-padRight, y)
		w(`<text x="%d" y="%.1f" class="ytick">%s</text>`, padLeft-6, y+4, esc(t.label))
	}
	for _, t := range c.xTicks {
		if t.v > xMax {
			continue
		}
		x := px(t.v)
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/>`, x, padTop, x, padTop+plotH)
		w(`<text x="%.1f" y="%d" class="xtick">%s</text>`, x, padTop+plotH+16, esc(t.label))
	}
	w(`<path d="M%d %d V%d H%d" class="axis"/>`, padLeft, padTop, padTop+plotH, chartW-padRight)
	w(`<text x="%d" y="%d" class="xlabel">%s</text>`, padLeft+plotW/2, chartH-6, esc(c.xLabel))
	ylabel := c.yLabel
	if unit != "" {
		ylabel += " (" + unit + ")"
	}
	w(`<text transform="translate(14 %d) rotate(-90)" class="ylabel">%s</text>`, padTop+plotH/2, esc(ylabel))

	// Reference lines within the range, labelled once the series are
	// drawn so that the labels stay readable; the others are named in a
	// note, so that a far-away reference does not flatten the data.
	var off []string
	var labels strings.Builder
	for _, r := range c.refs {
		if !finite(r.y) || r.y > yTop {
			off = append(off, r.label+" is above this range")
			continue
		}
		y := py(r.y)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="ref"/>`, padLeft, y, chartW-padRight, y)
		fmt.Fprintf(&labels, `<text x="%d" y="%.1f" class="reflabel">%s</text>`, chartW-padRight-4, y-4, esc(r.label))
	}
	if len(off) > 0 {
		w(`<text x="%d" y="%d" class="note">%s</text>`, chartW-padRight, chartH-6, esc(strings.Join(off, "; ")))
	}
	if npts == 0 {
		w(`<text x="%d" y="%d" class="empty">no samples</text>`, padLeft+plotW/2, padTop+plotH/2)
	}

	// Series, the last on top (a dashed one lets those below show
	// through where they coincide), then the legend along the top right.
	for _, l := range c.lines {
		var d strings.Builder
		var pts []point
		for _, p := range l.pts {
			if !finite(p.x) || !finite(p.y) {
				continue
			}
			cmd := "L"
			if len(pts) == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, px(p.x), py(p.y))
			pts = append(pts, p)
		}
		if len(pts) == 0 {
			continue
		}
		dash := ""
		if l.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		w(`<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`,
			strings.TrimSpace(d.String()), l.color, dash)
		if len(pts) <= maxMarkers {
			for _, p := range pts {
				w(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s at %s: %s</title></circle>`,
					px(p.x), py(p.y), l.color, esc(l.name), esc(c.fmtX(p.x)), esc(c.yKind.fmtY(p.y)))
			}
		}
	}
	b.WriteString(labels.String())
	x := float64(chartW - padRight)
	for i := len(c.lines) - 1; i >= 0; i-- {
		l := c.lines[i]
		x -= 7*float64(len([]rune(l.name))) + 34
		dash := ""
		if l.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		w(`<line x1="%.1f" y1="16" x2="%.1f" y2="16" stroke="%s" stroke-width="3"%s/>`, x, x+20, l.color, dash)
		w(`<text x="%.1f" y="20" class="legend">%s</text>`, x+25, esc(l.name))
	}
	w(`</svg>`)
	return b.String()
}

// esc escapes s for SVG text and attribute values.
func esc(s string) string { return html.EscapeString(s) }
