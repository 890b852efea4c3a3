package profiling_test

import (
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// newScheduler starts a scheduler that the test stops when it ends.
func newScheduler(t testing.TB, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

// requireWellFormed fails unless doc is well-formed XML.
func requireWellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, "not well-formed:\n%.2000s", doc)
	}
}

var svgBlock = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// requireDrawable checks an HTML or SVG document for what breaks a plot:
// a malformed <svg> block, or a NaN or infinite number. It returns the
// number of <svg> blocks.
func requireDrawable(t *testing.T, doc string) int {
	t.Helper()
	require.NotContains(t, doc, "NaN")
	require.NotContains(t, doc, "Inf")
	blocks := svgBlock.FindAllString(doc, -1)
	for _, b := range blocks {
		requireWellFormed(t, b)
	}
	return len(blocks)
}

// svgText is a <text> of a chart and its extent, estimated as a reader
// of the brief would: characters times font size times 0.6 wide, 0.75 of
// the font size above the baseline and 0.2 below.
type svgText struct {
	class, s, anchor string
	x0, y0, x1, y1   float64
}

// svgChart is what a chart's SVG holds, parsed with encoding/xml.
type svgChart struct {
	title  string
	texts  []svgText
	series [][][2]float64 // the data lines' runs of points between gaps, in pixels
	lines  int            // data lines (paths)
	refs   []float64      // the reference lines' y
	axis   bool           // the axis path is there
}

var (
	pathPoint = regexp.MustCompile(`([ML])\s*(-?[\d.]+)[ ,](-?[\d.]+)`)
	translate = regexp.MustCompile(`translate\(\s*(-?[\d.]+)[ ,]+(-?[\d.]+)\s*\)\s*rotate\(-90\)`)
)

// parseSVG parses one chart.
func parseSVG(t *testing.T, doc string) svgChart {
	t.Helper()
	var c svgChart
	d := xml.NewDecoder(strings.NewReader(doc))
	attrs := func(se xml.StartElement) map[string]string {
		m := map[string]string{}
		for _, a := range se.Attr {
			m[a.Name.Local] = a.Value
		}
		return m
	}
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err, "number %q", s)
		return f
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		a := attrs(se)
		switch se.Name.Local {
		case "path":
			switch a["class"] {
			case "series":
				c.lines++
				for _, m := range pathPoint.FindAllStringSubmatch(a["d"], -1) {
					if m[1] == "M" {
						c.series = append(c.series, nil)
					}
					run := &c.series[len(c.series)-1]
					*run = append(*run, [2]float64{num(m[2]), num(m[3])})
				}
			case "axis":
				c.axis = true
			}
		case "line":
			if a["class"] == "ref" {
				c.refs = append(c.refs, num(a["y1"]))
			}
		case "text":
			var s strings.Builder
			for {
				tok, err := d.Token()
				require.NoError(t, err)
				if cd, ok := tok.(xml.CharData); ok {
					s.Write(cd)
				}
				if _, ok := tok.(xml.EndElement); ok {
					break
				}
			}
			require.Contains(t, a, "font-size", "text %q has its size", s.String())
			fs := num(a["font-size"])
			w := float64(utf8.RuneCountInString(s.String())) * fs * 0.6
			st := svgText{class: a["class"], s: s.String(), anchor: a["text-anchor"]}
			if m := translate.FindStringSubmatch(a["transform"]); m != nil {
				x, y := num(m[1]), num(m[2])
				require.Equal(t, "middle", st.anchor)
				st.x0, st.x1, st.y0, st.y1 = x-0.75*fs, x+0.2*fs, y-w/2, y+w/2
			} else {
				require.Empty(t, a["transform"], "a transform the test does not know")
				x, y := num(a["x"]), num(a["y"])
				switch st.anchor {
				case "middle":
					x -= w / 2
				case "end":
					x -= w
				default:
					require.Equal(t, "start", st.anchor, "text %q", st.s)
				}
				st.x0, st.x1, st.y0, st.y1 = x, x+w, y-0.75*fs, y+0.2*fs
			}
			if st.class == "title" {
				c.title = st.s
			}
			c.texts = append(c.texts, st)
		}
	}
	return c
}

// crosses reports whether the segment p-q passes through the box of t,
// sampled finely enough for labels a few pixels tall.
func (t svgText) crosses(p, q [2]float64) bool {
	for i := 0.0; i <= 200; i++ {
		x, y := p[0]+(q[0]-p[0])*i/200, p[1]+(q[1]-p[1])*i/200
		if x > t.x0 && x < t.x1 && y > t.y0 && y < t.y1 {
			return true
		}
	}
	return false
}

// requireReadable checks a chart for what makes one unreadable: no
// title, no axis, axis labels without units, too few ticks, labels over
// one another, a data line through a label (reference lines are named in
// the legend, never on the data), and, when data is required, no data.
func requireReadable(t *testing.T, doc string, wantData bool) svgChart {
	t.Helper()
	c := parseSVG(t, doc)
	require.NotEmpty(t, c.title)
	assert.True(t, c.axis, "%s: axes", c.title)
	count := map[string]int{}
	for _, tx := range c.texts {
		count[tx.class]++
		switch tx.class {
		case "xlabel", "ylabel":
			assert.Regexp(t, `\(.+\)$`, tx.s, "%s: the %s names its unit", c.title, tx.class)
		}
	}
	assert.Equal(t, 1, count["xlabel"], c.title)
	assert.Equal(t, 1, count["ylabel"], c.title)
	assert.GreaterOrEqual(t, count["xtick"], 2, c.title)
	assert.GreaterOrEqual(t, count["ytick"], 2, c.title)
	if wantData {
		points := 0
		for _, s := range c.series {
			points += len(s)
		}
		assert.Positive(t, points, "%s: has data", c.title)
		assert.Zero(t, count["empty"], c.title)
	}
	for i, a := range c.texts {
		assert.True(t, a.x0 >= 0 && a.x1 <= 960 && a.y0 >= 0 && a.y1 <= 300, "%s: %q inside the chart", c.title, a.s)
		for _, b := range c.texts[i+1:] {
			assert.False(t, a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1,
				"%s: labels %q and %q overlap: %v and %v", c.title, a.s, b.s, a, b)
		}
		if a.class == "ylabel" {
			continue // beside the axis, left of the data
		}
		for _, s := range c.series {
			for k := 1; k < len(s); k++ {
				assert.False(t, a.crosses(s[k-1], s[k]), "%s: a line crosses %q", c.title, a.s)
			}
		}
		for _, y := range c.refs {
			// A reference line runs across the plot, x 66 to 936.
			if y > a.y0 && y < a.y1 && a.x1 > 66 && a.x0 < 936 {
				assert.Fail(t, "a reference line strikes a label", "%s: %q at y=%v", c.title, a.s, y)
			}
		}
	}
	assert.Zero(t, count["reflabel"], "%s: reference lines are named in the legend", c.title)
	return c
}

// charts returns the <svg> blocks of an HTML page.
func charts(page string) []string { return svgBlock.FindAllString(page, -1) }

// awaitFired waits until s has fired want timers in all and their tasks
// have returned (or are blocked: Stats lists them), so that their times are
// in its Stats: Fired counts a timer as the pass hands its task to the
// runner, which records its lateness as it starts it and its time as it
// returns. A marker timer on every shard makes sure the passes that fired
// them have ended too: each fires in a pass after them. It returns the
// number of markers, which Fired also counts.
func awaitFired(t *testing.T, s *shardwheel.Scheduler, want uint64) (markers uint64) {
	t.Helper()
	done := func(want uint64) bool {
		st := s.Stats().Total
		returned := st.PassTime.Count() == 0 || // WithStats(false): tasks are not timed
			st.TaskTime.Count()+uint64(len(st.Blocked)) >= st.Fired+st.PeriodicRuns
		return st.Fired >= want && returned
	}
	require.Eventually(t, func() bool { return done(want) }, 20*time.Second, time.Millisecond)
	marked := make([]bool, s.Shards())
	for key := uint64(0); markers < uint64(len(marked)); key++ {
		if i := s.ShardOf(key); !marked[i] {
			marked[i] = true
			markers++
			_, err := s.AfterFunc(time.Millisecond, func() {}, shardwheel.ByKey(key))
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool { return done(want + markers) }, 20*time.Second, time.Millisecond)
	return markers
}
