package profiling

import (
	"cmp"
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
	maxMarkers = 60 // lines with more points get no markers
)

// Font sizes of the chart's text, set as attributes so that a chart
// keeps its layout outside the page's style sheet.
const (
	fontTitle  = 15
	fontLegend = 12
	fontAxis   = 12 // axis labels
	fontTick   = 11 // tick labels, reference labels and notes
	fontEmpty  = 16
)

// Text boxes are estimated, not measured: a character is at most
// charWidth (bold: boldWidth) times the font size wide in the sans-serif
// fonts the page asks for, and a line of text reaches ascent above its
// baseline and descent below it.
const (
	charWidth = 0.6
	boldWidth = 0.66
	ascent    = 0.8
	descent   = 0.25
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

// line is one series of a chart. A point whose x or y is not finite
// (NaN) is a gap: the line stops before it and starts again after it, so
// that no segment stands for time without data.
type line struct {
	name  string
	color string
	dash  string // stroke-dasharray; "" draws a solid line
	pts   []point
}

// ref is a horizontal reference line, such as one tick, drawn dashed
// (dash, a stroke-dasharray; "" for refDash) and named in the legend.
type ref struct {
	label string
	y     float64
	dash  string
}

// refDash is a reference line's dashes unless it says otherwise.
const refDash = "2 4"

// band shades the x range [x0, x1], such as an interval with a spike;
// label is its tooltip.
type band struct {
	x0, x1 float64
	label  string
}

// tickMark is an axis tick at v, labelled label.
type tickMark struct {
	v     float64
	label string
}

// chart is a line chart rendered to inline SVG by svg. The x range is
// fixed by the caller ([xMin, xMax] with xTicks); the y range starts at 0
// and fits the data, so a chart of zeros, or of no points, still has axes.
type chart struct {
	title      string
	xLabel     string // with its unit
	xMin, xMax float64
	xTicks     []tickMark
	yLabel     string // the unit is appended
	yKind      yKind
	yNoun      string // what a yCount or yRate chart counts, such as "timers"
	lines      []line
	refs       []ref
	bands      []band
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

// agoTicks returns ticks for an x axis of seconds from -span to 0, the
// last labelled "now".
func agoTicks(span float64) []tickMark {
	ticks := linearTicks(span, 10, func(v, _ float64) string { return units.Sig(-v) + "s" })
	for i := range ticks {
		ticks[i].v = -ticks[i].v
	}
	ticks[0].label = "now"
	return ticks
}

// scale returns the unit and divisor of y values up to top.
func (c chart) scale(top float64) (unit string, div float64) {
	switch c.yKind {
	case yDuration:
		return units.DurationUnit(top)
	case yRate:
		unit, div = units.SIUnit(top)
		return strings.TrimSpace(unit+" "+c.yNoun) + "/s", div
	}
	unit, div = units.SIUnit(top)
	return strings.TrimSpace(unit + " " + c.yNoun), div
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

// box is a rectangle in SVG user units.
type box struct{ x0, y0, x1, y1 float64 }

// overlaps reports whether a and b share more than an edge.
func (a box) overlaps(b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }

// within reports whether a lies inside b.
func (a box) within(b box) bool { return a.x0 >= b.x0 && a.x1 <= b.x1 && a.y0 >= b.y0 && a.y1 <= b.y1 }

// text is one label of a chart.
type text struct {
	x, y   float64
	size   float64
	anchor string // start, middle or end
	bold   bool
	class  string
	s      string
}

// box returns the estimated extent of t.
func (t text) box() box {
	cw := charWidth
	if t.bold {
		cw = boldWidth
	}
	w := float64(len([]rune(t.s))) * t.size * cw
	x0 := t.x
	switch t.anchor {
	case "middle":
		x0 -= w / 2
	case "end":
		x0 -= w
	}
	return box{x0, t.y - ascent*t.size, x0 + w, t.y + descent*t.size}
}

// svg writes t.
func (t text) svg(b *strings.Builder) {
	weight := ""
	if t.bold {
		weight = ` font-weight="600"`
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%g" text-anchor="%s"%s class="%s">%s</text>`,
		t.x, t.y, t.size, t.anchor, weight, t.class, esc(t.s))
}

// layout keeps the boxes of the labels placed so far.
type layout struct{ boxes []box }

// free reports whether b overlaps no placed label.
func (l *layout) free(b box) bool {
	for _, o := range l.boxes {
		if o.overlaps(b) {
			return false
		}
	}
	return true
}

// add places b.
func (l *layout) add(b box) { l.boxes = append(l.boxes, b) }

// svg renders the chart. The result is well-formed XML whatever the data:
// non-finite values are gaps and empty ranges get a default size. No two
// labels overlap (by their estimated extent), and no label sits on the
// data: reference lines are named in the legend, above the plot, which
// grows rows as it needs them.
func (c chart) svg() string {
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
	unit, div := c.scale(top)
	yTicks := linearTicks(top/div, 5, fmtStep)
	yTop := yTicks[len(yTicks)-1].v * div // raw value at the top of the plot
	xMin, xMax := c.xMin, c.xMax
	if !finite(xMin) {
		xMin = 0
	}
	if !(xMax > xMin) || !finite(xMax) {
		xMax = xMin + 1
	}
	canvas := box{0, 0, chartW, chartH}

	var lay layout
	var labels []text // drawn last, over the data
	place := func(t text) {
		lay.add(t.box())
		labels = append(labels, t)
	}
	place(text{x: padLeft, y: 20, size: fontTitle, anchor: "start", bold: true, class: "title", s: c.title})

	// The legend, right-aligned along the top, in rows below the title's
	// when it would run into it: the lines, then the reference lines in
	// the range. The plot starts below its last row.
	type entry struct {
		name, color, dash string
		ref               bool
	}
	var entries []entry
	for _, l := range c.lines {
		entries = append(entries, entry{l.name, l.color, l.dash, false})
	}
	var off []string
	for _, r := range c.refs {
		if !finite(r.y) || r.y > yTop {
			off = append(off, r.label+" is above this range")
			continue
		}
		entries = append(entries, entry{r.label, "#555", cmp.Or(r.dash, refDash), true})
	}
	var legend strings.Builder
	row, x := 0, float64(chartW-padRight)
	for i := len(entries) - 1; i >= 0; i-- {
		en := entries[i]
		tw := float64(len([]rune(en.name))) * fontLegend * charWidth
		for {
			y := 20 + 16*float64(row)
			bx := box{x - tw - 25, y - ascent*fontLegend, x, y + descent*fontLegend}
			if lay.free(bx) || row >= 1 && x == chartW-padRight {
				lay.add(bx)
				width := "3"
				if en.ref {
					width = "1.5"
				}
				fmt.Fprintf(&legend, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%s"%s/>`,
					bx.x0, y-4, bx.x0+20, y-4, en.color, width, dashAttr(en.dash))
				text{x: bx.x0 + 25, y: y, size: fontLegend, anchor: "start", class: "legend", s: en.name}.svg(&legend)
				x = bx.x0 - 14
				break
			}
			row, x = row+1, chartW-padRight
		}
	}
	plotTop := float64(padTop + 16*max(0, row-1))
	plotHeight := float64(chartH-padBottom) - plotTop
	px := func(x float64) float64 { return padLeft + min(max((x-xMin)/(xMax-xMin), 0), 1)*plotW }
	py := func(y float64) float64 { return plotTop + plotHeight - min(max(y/yTop, 0), 1)*plotHeight }
	plotBottom := plotTop + plotHeight

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" class="chart">`,
		chartW, chartH, esc(c.title))

	for _, bd := range c.bands {
		if !finite(bd.x0) || !finite(bd.x1) {
			continue
		}
		x0, x1 := px(min(bd.x0, bd.x1)), px(max(bd.x0, bd.x1))
		if x1-x0 < 3 { // visible even when narrow
			x0, x1 = (x0+x1)/2-1.5, (x0+x1)/2+1.5
		}
		w(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="band"><title>%s</title></rect>`,
			x0, plotTop, x1-x0, plotHeight, esc(bd.label))
	}

	// Grid, axes and their labels.
	for _, t := range yTicks {
		y := py(t.v * div)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, padLeft, y, chartW-padRight, y)
		place(text{x: padLeft - 6, y: y + 4, size: fontTick, anchor: "end", class: "ytick", s: t.label})
	}
	for _, t := range c.xTicks {
		if t.v < xMin || t.v > xMax {
			continue
		}
		x := px(t.v)
		w(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, x, plotTop, x, plotBottom)
		tt := text{x: x, y: plotBottom + 16, size: fontTick, anchor: "middle", class: "xtick", s: t.label}
		if lay.free(tt.box()) && tt.box().within(canvas) {
			place(tt)
		}
	}
	w(`<path d="M%d %.1f V%.1f H%d" class="axis"/>`, padLeft, plotTop, plotBottom, chartW-padRight)
	place(text{x: padLeft + plotW/2, y: chartH - 6, size: fontAxis, anchor: "middle", class: "xlabel", s: c.xLabel})
	ylabel := c.yLabel
	if unit != "" {
		ylabel += " (" + unit + ")"
	}
	mid := plotTop + plotHeight/2
	yw := float64(len([]rune(ylabel))) * fontAxis * charWidth
	lay.add(box{14 - ascent*fontAxis, mid - yw/2, 14 + descent*fontAxis, mid + yw/2})
	w(`<text transform="translate(14 %.1f) rotate(-90)" font-size="%d" text-anchor="middle" class="ylabel">%s</text>`,
		mid, fontAxis, esc(ylabel))

	// Reference lines in the range; the others are named in a note, so
	// that a far-away reference does not flatten the data.
	for _, r := range c.refs {
		if finite(r.y) && r.y <= yTop {
			y := py(r.y)
			w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="ref"%s/>`, padLeft, y, chartW-padRight, y, dashAttr(cmp.Or(r.dash, refDash)))
		}
	}
	if len(off) > 0 {
		note := strings.Join(off, "; ")
		var t text
		for _, cand := range []text{
			{x: chartW - padRight, y: chartH - 6, anchor: "end"},
			{x: chartW - padRight, y: plotTop - 8, anchor: "end"},
			{x: padLeft, y: plotTop - 8, anchor: "start"},
		} {
			cand.size, cand.class, cand.s = fontTick, "note", note
			if t.s == "" || lay.free(cand.box()) && cand.box().within(canvas) {
				t = cand
				if lay.free(cand.box()) {
					break
				}
			}
		}
		place(t)
	}
	if npts == 0 {
		place(text{x: padLeft + plotW/2, y: mid, size: fontEmpty, anchor: "middle", class: "empty", s: "no samples"})
	}

	// Series, the last on top (a dashed one lets those below show
	// through where they coincide): a path per run of points without a
	// gap, and a marker on each point when there are few, or on a point
	// alone between gaps, which no path shows.
	for _, l := range c.lines {
		var d strings.Builder
		var markers []int
		pen := false
		for i, p := range l.pts {
			if !finite(p.x) || !finite(p.y) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, px(p.x), py(p.y))
			alone := !pen && (i+1 == len(l.pts) || !finite(l.pts[i+1].x) || !finite(l.pts[i+1].y))
			if alone || len(l.pts) <= maxMarkers {
				markers = append(markers, i)
			}
			pen = true
		}
		if d.Len() > 0 {
			w(`<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s class="series"/>`,
				strings.TrimSpace(d.String()), l.color, dashAttr(l.dash))
		}
		for _, i := range markers {
			p := l.pts[i]
			w(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s at %s: %s</title></circle>`,
				px(p.x), py(p.y), l.color, esc(l.name), esc(c.fmtX(p.x)), esc(c.yKind.fmtY(p.y)))
		}
	}
	for _, t := range labels {
		t.svg(&b)
	}
	b.WriteString(legend.String())
	w(`</svg>`)
	return b.String()
}

// dashAttr returns the stroke-dasharray attribute of dash, or "".
func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, dash)
}

// esc escapes s for SVG text and attribute values.
func esc(s string) string { return html.EscapeString(s) }
