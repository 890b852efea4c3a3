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

// hitBy reports whether the segment from p to q crosses a, by clipping
// it to a (Liang-Barsky).
func (a box) hitBy(p, q point) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := q.x-p.x, q.y-p.y
	for _, e := range [][2]float64{{-dx, p.x - a.x0}, {dx, a.x1 - p.x}, {-dy, p.y - a.y0}, {dy, a.y1 - p.y}} {
		pe, qe := e[0], e[1]
		if pe == 0 {
			if qe < 0 {
				return false
			}
			continue
		}
		t := qe / pe
		if pe < 0 {
			t0 = max(t0, t)
		} else {
			t1 = min(t1, t)
		}
		if t0 > t1 {
			return false
		}
	}
	return true
}

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
// non-finite values are skipped and empty ranges get a default size. No
// two labels overlap (by their estimated extent), and reference labels sit
// where the fewest lines cross them, on a background that keeps them
// readable where one must.
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
	px := func(x float64) float64 { return padLeft + min(max((x-xMin)/(xMax-xMin), 0), 1)*plotW }
	py := func(y float64) float64 { return padTop + plotH - min(max(y/yTop, 0), 1)*plotH }
	plot := box{padLeft, padTop, chartW - padRight, padTop + plotH}
	canvas := box{0, 0, chartW, chartH}

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" aria-label="%s" class="chart">`,
		chartW, chartH, esc(c.title))
	var lay layout
	var labels []text // drawn last, over the data
	place := func(t text) {
		lay.add(t.box())
		labels = append(labels, t)
	}

	for _, bd := range c.bands {
		if !finite(bd.x0) || !finite(bd.x1) {
			continue
		}
		x0, x1 := px(min(bd.x0, bd.x1)), px(max(bd.x0, bd.x1))
		if x1-x0 < 3 { // visible even when narrow
			x0, x1 = (x0+x1)/2-1.5, (x0+x1)/2+1.5
		}
		w(`<rect x="%.1f" y="%d" width="%.1f" height="%d" class="band"><title>%s</title></rect>`,
			x0, padTop, x1-x0, plotH, esc(bd.label))
	}

	// Title, grid, axes and their labels.
	place(text{x: padLeft, y: 20, size: fontTitle, anchor: "start", bold: true, class: "title", s: c.title})
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
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/>`, x, padTop, x, padTop+plotH)
		tt := text{x: x, y: padTop + plotH + 16, size: fontTick, anchor: "middle", class: "xtick", s: t.label}
		if lay.free(tt.box()) && tt.box().within(canvas) {
			place(tt)
		}
	}
	w(`<path d="M%d %d V%d H%d" class="axis"/>`, padLeft, padTop, padTop+plotH, chartW-padRight)
	place(text{x: padLeft + plotW/2, y: chartH - 6, size: fontAxis, anchor: "middle", class: "xlabel", s: c.xLabel})
	ylabel := c.yLabel
	if unit != "" {
		ylabel += " (" + unit + ")"
	}
	yw := float64(len([]rune(ylabel))) * fontAxis * charWidth
	lay.add(box{14 - ascent*fontAxis, padTop + plotH/2 - yw/2, 14 + descent*fontAxis, padTop + plotH/2 + yw/2})
	w(`<text transform="translate(14 %d) rotate(-90)" font-size="%d" text-anchor="middle" class="ylabel">%s</text>`,
		padTop+plotH/2, fontAxis, esc(ylabel))

	// The legend, right-aligned along the top, in rows below the title's
	// when it would run into it.
	var legend strings.Builder
	row, x := 0, float64(chartW-padRight)
	for i := len(c.lines) - 1; i >= 0; i-- {
		l := c.lines[i]
		tw := float64(len([]rune(l.name))) * fontLegend * charWidth
		for {
			y := 20 + 16*float64(row)
			bx := box{x - tw - 25, y - ascent*fontLegend, x, y + descent*fontLegend}
			if lay.free(bx) || row >= 1 && x == chartW-padRight {
				lay.add(bx)
				fmt.Fprintf(&legend, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`,
					bx.x0, y-4, bx.x0+20, y-4, l.color, dashAttr(l.dash))
				text{x: bx.x0 + 25, y: y, size: fontLegend, anchor: "start", class: "legend", s: l.name}.svg(&legend)
				x = bx.x0 - 14
				break
			}
			row, x = row+1, chartW-padRight
		}
	}

	// Series in pixels, for drawing and for keeping labels off them.
	type series struct {
		l   line
		pts []point // in pixels
		raw []point
	}
	var drawn []series
	for _, l := range c.lines {
		s := series{l: l}
		for _, p := range l.pts {
			if finite(p.x) && finite(p.y) {
				s.pts = append(s.pts, point{px(p.x), py(p.y)})
				s.raw = append(s.raw, p)
			}
		}
		if len(s.pts) > 0 {
			drawn = append(drawn, s)
		}
	}
	// crossings counts the data segments and the reference lines other
	// than the one at y skip that cross bx.
	crossings := func(bx box, skip float64) (data, refs int) {
		for _, s := range drawn {
			for i := range s.pts {
				if bx.hitBy(s.pts[max(i-1, 0)], s.pts[i]) {
					data++
				}
			}
		}
		for _, r := range c.refs {
			if y := py(r.y); finite(r.y) && r.y <= yTop && y != skip && bx.hitBy(point{padLeft, y}, point{chartW - padRight, y}) {
				refs++
			}
		}
		return data, refs
	}

	// Reference lines within the range; the others are named in a note,
	// so that a far-away reference does not flatten the data. Each label
	// goes where it overlaps no other label and the fewest lines cross
	// it: above or below its line, at the right, left or middle.
	var off []string
	var refLabels strings.Builder
	for _, r := range c.refs {
		if !finite(r.y) || r.y > yTop {
			off = append(off, r.label+" is above this range")
			continue
		}
		y := py(r.y)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="ref"/>`, padLeft, y, chartW-padRight, y)
		// Candidates: above the line, then below it, at the right,
		// left and middle, where the fewest data lines cross; then, only
		// when another label or reference line leaves no room there,
		// further off, a line of text at a time. A label stays by its
		// line rather than dodge data: its background keeps it legible.
		const (
			collides    = 1_000_000 // with a label, or off the chart
			struck      = 5000      // by another reference line
			outsidePlot = 2000
			perStep     = 300 // away from its line
			perCrossing = 10  // by a data line
		)
		best, bestScore := text{}, math.MaxInt
		for step := range 4 {
			for i, cand := range []text{
				{x: chartW - padRight - 4, y: y - 4, anchor: "end"},
				{x: chartW - padRight - 4, y: y + 13, anchor: "end"},
				{x: padLeft + 4, y: y - 4, anchor: "start"},
				{x: padLeft + 4, y: y + 13, anchor: "start"},
				{x: padLeft + plotW/2, y: y - 4, anchor: "middle"},
				{x: padLeft + plotW/2, y: y + 13, anchor: "middle"},
			} {
				off := float64(step * (fontTick + 2))
				if i%2 == 0 {
					cand.y -= off
				} else {
					cand.y += off
				}
				cand.size, cand.class, cand.s = fontTick, "reflabel", r.label
				bx := cand.box()
				data, refs := crossings(bx, y)
				score := data*perCrossing + refs*struck + step*perStep + i
				if !lay.free(bx) || !bx.within(canvas) {
					score += collides
				}
				if !bx.within(plot) {
					score += outsidePlot
				}
				if score < bestScore {
					best, bestScore = cand, score
				}
			}
		}
		bx := best.box()
		lay.add(bx)
		fmt.Fprintf(&refLabels, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" class="labelbg"/>`,
			bx.x0-2, bx.y0, bx.x1-bx.x0+4, bx.y1-bx.y0)
		best.svg(&refLabels)
	}
	if len(off) > 0 {
		note := strings.Join(off, "; ")
		var t text
		for _, cand := range []text{
			{x: chartW - padRight, y: chartH - 6, anchor: "end"},
			{x: chartW - padRight, y: padTop - 8, anchor: "end"},
			{x: padLeft, y: padTop - 8, anchor: "start"},
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
		place(text{x: padLeft + plotW/2, y: padTop + plotH/2, size: fontEmpty, anchor: "middle", class: "empty", s: "no samples"})
	}

	// Series, the last on top (a dashed one lets those below show
	// through where they coincide), then the labels over them.
	for _, s := range drawn {
		var d strings.Builder
		for i, p := range s.pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, p.x, p.y)
		}
		w(`<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s class="series"/>`,
			strings.TrimSpace(d.String()), s.l.color, dashAttr(s.l.dash))
		if len(s.pts) <= maxMarkers {
			for i, p := range s.pts {
				w(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s at %s: %s</title></circle>`,
					p.x, p.y, s.l.color, esc(s.l.name), esc(c.fmtX(s.raw[i].x)), esc(c.yKind.fmtY(s.raw[i].y)))
			}
		}
	}
	b.WriteString(refLabels.String())
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
