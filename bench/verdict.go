package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Verdict is a command's conclusion: the lines it ends its text report
// with, and the figures they rest on.
type Verdict struct {
	// Summary is the conclusion as the text report prints it.
	Summary []string `json:"summary"`
	// Ratios are candidate / baseline by figure (see each command's
	// ratio keys in the package documentation).
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// Winners names, by figure, the implementation that did better, or
	// "tie" (within tieWithin or the runs' ranges) or "noise" (too few
	// samples to tell).
	Winners map[string]string `json:"winners,omitempty"`
}

// Thresholds of the verdicts.
const (
	// tieWithin is how close two figures must be to count as a tie: runs
	// of one load on a shared host differ by several percent.
	tieWithin = 0.05
	// minSamples is the fewest values a percentile rests on before it
	// counts as a figure rather than noise: the p99 of 1000 values is
	// their tenth largest.
	minSamples = 1000
	// minGCCycles is the fewest collections a GC figure rests on before
	// it counts: one cycle more or less changes 2 by half.
	minGCCycles = 3
	// winTie and winNoise are the winner cells that name no one.
	winTie   = "tie"
	winNoise = "noise"
	// minShare is the share of the offered request rate each run must
	// issue for two runs' figures to compare: a run below it was paced by
	// the host, not by its timers, and its CPU, heap and lateness are
	// those of a different load.
	minShare = 0.95
	// maxStretch is how much longer than asked a run's measured window may
	// last for its figures to compare: a window that ran far longer was
	// starved of CPUs, its rates and latencies the host's.
	maxStretch = 1.5
)

// offLoad says, as a clause about r's implementation, how a run of the
// proxy-shaped load strayed from the load asked of it (asked is the
// window asked for): it issued less than minShare of the offered rate, or
// its window ran more than maxStretch times as long; "" when it ran as
// asked. An interrupted run's window is short, not long, and is reported
// as such elsewhere.
func offLoad(r *Result, asked time.Duration) string {
	short := r.TargetRate > 0 && r.AchievedRate < minShare*r.TargetRate
	long := asked > 0 && !r.Partial && float64(r.Measured) > maxStretch*float64(asked)
	rate := fmt.Sprintf("%s issued %.0f%% of the offered %s requests/s (it fell up to %s behind)",
		r.Impl, 100*r.AchievedRate/r.TargetRate, units.SI(r.TargetRate), units.Duration(r.MaxBacklog))
	switch {
	case short && long:
		return fmt.Sprintf("%s and its %v window ran %s", rate, asked, units.Duration(r.Measured))
	case short:
		return rate
	case long:
		return fmt.Sprintf("%s's %v window ran %s", r.Impl, asked, units.Duration(r.Measured))
	}
	return ""
}

// trend words a set of ratios, candidate / baseline, for a conclusion:
// "lower" when every one is below 1 by more than tieWithin, "higher" when
// every one is above, "about the same" when every one is within it, else
// "mixed"; "" for none.
func trend(qs []float64) string {
	var lower, higher, same int
	for _, q := range qs {
		switch {
		case q < 1-tieWithin:
			lower++
		case q > 1+tieWithin:
			higher++
		default:
			same++
		}
	}
	switch n := len(qs); {
	case n == 0:
		return ""
	case lower == n:
		return "lower"
	case higher == n:
		return "higher"
	case same == n:
		return "about the same"
	}
	return "mixed"
}

// ratioSpan shows ratios as their range: "0.42x", or "0.42x-0.47x".
func ratioSpan(qs []float64) string {
	lo, hi := slices.Min(qs), slices.Max(qs)
	if fmtRatio(lo, true) == fmtRatio(hi, true) {
		return fmtRatio(lo, true)
	}
	return fmtRatio(lo, true) + "-" + fmtRatio(hi, true)
}

// candidate is one implementation's figure, as a winner is chosen from:
// a median and its range over the runs (lo == hi for a single run).
type candidate struct {
	name        string
	med, lo, hi float64
	ok          bool // false: not measured, or no such figure
}

// pickWinner returns the name of the candidate whose median is best by
// better ("lower" or "higher"), "tie" when another is within tieWithin of
// it or their ranges overlap, or "" when fewer than two were measured.
func pickWinner(better string, cs ...candidate) string {
	var in []candidate
	for _, c := range cs {
		if c.ok {
			in = append(in, c)
		}
	}
	if len(in) < 2 || (better != "lower" && better != "higher") {
		return ""
	}
	best := 0
	for i, c := range in {
		if (better == "lower" && c.med < in[best].med) || (better == "higher" && c.med > in[best].med) {
			best = i
		}
	}
	b := in[best]
	var tied []string
	for i, c := range in {
		if i == best {
			continue
		}
		near := math.Abs(c.med-b.med) <= tieWithin*math.Max(math.Abs(b.med), math.Abs(c.med))
		overlap := b.lo < b.hi && c.lo < c.hi && c.lo <= b.hi && b.lo <= c.hi
		if near || overlap {
			tied = append(tied, c.name)
		}
	}
	switch {
	case len(tied) == 0:
		return b.name
	case len(tied) == len(in)-1:
		return winTie
	}
	return strings.Join(append([]string{b.name}, tied...), " = ")
}

// fmtRatio formats a ratio for a table: two decimals from 0.1 up, two
// significant digits below (0.0042x, not 0.00x), 0x for 0, and "n/a"
// when there is none (!ok: the baseline is 0) or it is not finite.
func fmtRatio(r float64, ok bool) string {
	if !ok || math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	if r == 0 {
		return "0x"
	}
	if math.Abs(r) < 0.1 {
		return strconv.FormatFloat(r, 'g', 2, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}

// ratio returns a / b, and false when b is 0.
func ratio(a, b float64) (float64, bool) {
	if b == 0 {
		return 0, false
	}
	return a / b, true
}

// plural returns "1 run", "2 runs": n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listed joins items as prose: "a", "a and b", "a, b and c".
func listed(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// withRange shows a median and its range: "85ns (82ns-98ns)", or the
// median alone when the range shows as a single value (one run, or runs
// that agree to the digits shown).
func withRange(show func(float64) string, med, lo, hi float64) string {
	l, h := show(lo), show(hi)
	if l == h {
		return show(med)
	}
	return fmt.Sprintf("%s (%s-%s)", show(med), l, h)
}

// lateDiff is a verdict's word on a lateness p50, shardwheel's (sw)
// against its baseline's (base). When shardwheel's is later it gives the
// difference: "by design" when that is within byDesignTicks of a tick
// (deadlines round up to the tick, so tasks run up to a tick later), and
// plainly as later, with the ratio, when it is more. Otherwise it gives
// the ratio q.
func lateDiff(sw, base, tick time.Duration, q float64, ok bool) string {
	switch d := sw - base; {
	case d <= 0:
		return fmtRatio(q, ok)
	case float64(d) <= byDesignTicks*float64(tick):
		return fmt.Sprintf("%s (by design: deadlines round up to the %v tick)", signed(d), tick)
	case ok:
		return fmt.Sprintf("%s later (%s)", signed(d), fmtRatio(q, ok))
	default:
		return signed(d) + " later"
	}
}

// byDesignTicks is how many ticks later than the baseline's a lateness
// p50 of shardwheel's may be and still be put down to rounding up to the
// tick: one tick, and half a tick for the clocks' and schedulers' jitter.
const byDesignTicks = 1.5

// signed formats d with its sign: +500µs, -1.2ms, 0.
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + units.Duration(d)
	}
	return units.Duration(d)
}
