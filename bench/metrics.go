package main

import (
	"fmt"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/units"
)

// metric is one row of a report: how to read it from a result of type R
// (compare's Result, proxy's ProxyResult), show it, and which way is
// better.
type metric[R any] struct {
	group string // heading the row goes under
	key   string // JSON key of its ratio; "" for no ratio
	label string
	// better is "lower" or "higher", or "" for figures that describe
	// the load rather than rate the implementation.
	better string
	// value returns the figure, and false when the result has none
	// (AfterFunc has no tick lag).
	value func(r *R) (float64, bool)
	show  func(r *R) string
	// noise, if set, says why r's figure is too thin to rate (too few
	// samples), or returns "".
	noise func(r *R) string
}

// always adapts a figure every result has.
func always[R any](f func(r *R) float64) func(r *R) (float64, bool) {
	return func(r *R) (float64, bool) { return f(r), true }
}

// latencyRows are the rows of one latency distribution, read by get
// (which returns nil when the result has none).
func latencyRows[R any](group, key, label string, get func(r *R) *hist.Percentiles) []metric[R] {
	qs := []struct {
		key, label string
		pick       func(p *hist.Percentiles) time.Duration
	}{
		{"p50", "p50", func(p *hist.Percentiles) time.Duration { return p.P50 }},
		{"p99", "p99", func(p *hist.Percentiles) time.Duration { return p.P99 }},
		{"p999", "p99.9", func(p *hist.Percentiles) time.Duration { return p.P999 }},
		{"max", "max", func(p *hist.Percentiles) time.Duration { return p.Max }},
	}
	var out []metric[R]
	for _, q := range qs {
		value := func(r *R) (float64, bool) {
			p := get(r)
			if p == nil || p.Count == 0 {
				return 0, false
			}
			return float64(q.pick(p)), true
		}
		out = append(out, metric[R]{
			group: group, key: key + "_" + q.key, label: label + " " + q.label, better: "lower",
			value: value,
			noise: func(r *R) string {
				if p := get(r); p != nil && p.Count > 0 && p.Count < minSamples {
					return plural(int(p.Count), "sample")
				}
				return ""
			},
			show: func(r *R) string {
				v, ok := value(r)
				if !ok {
					return "n/a"
				}
				return units.Duration(time.Duration(v))
			},
		})
	}
	return out
}

// summaryRow is one row showing a whole distribution, read by get (which
// returns nil when the result has none).
func summaryRow(group, label string, get func(r *Result) *hist.Percentiles) metric[Result] {
	return metric[Result]{group: group, label: label,
		value: func(r *Result) (float64, bool) { return 0, false },
		show: func(r *Result) string {
			p := get(r)
			if p == nil {
				return "n/a"
			}
			return fmt.Sprintf("%s/%s/%s/%s", units.Duration(p.P50), units.Duration(p.P99), units.Duration(p.P999), units.Duration(p.Max))
		}}
}

// libraryRow is a row of r.Library's figures, as get reads and shows
// them. A figure within noise is shown, marked, but has no ratio: the
// ratio of a figure that could as well be 0 or negative says nothing.
func libraryRow(key, label string, get func(r *Result, l *libraryCPU) (float64, string)) metric[Result] {
	return metric[Result]{group: "cost", key: key, label: label, better: "lower",
		value: func(r *Result) (float64, bool) {
			if r.Library == nil || r.Library.Noise {
				return 0, false
			}
			v, _ := get(r, r.Library)
			return v, true
		},
		noise: func(r *Result) string {
			if r.Library != nil && r.Library.Noise {
				return fmt.Sprintf("below %.0f%% of the load alone's", 100*noiseShare)
			}
			return ""
		},
		show: func(r *Result) string {
			if r.Library == nil {
				return "n/a"
			}
			_, s := get(r, r.Library)
			if r.Library.Noise {
				s += " (noise)"
			}
			return s
		}}
}

// reportRows are the rows of the comparison, in order; library adds those
// of Result.Library after the CPU rows, for compare, whose runs include
// the load alone.
func reportRows(library bool) []metric[Result] {
	ms := []metric[Result]{
		{group: "throughput", key: "achieved_rate", label: "requests/s achieved", better: "higher",
			value: always(func(r *Result) float64 { return r.AchievedRate }),
			show: func(r *Result) string {
				return fmt.Sprintf("%s (%.0f%%)", units.SI(r.AchievedRate), 100*r.AchievedRate/r.TargetRate)
			}},
		{group: "throughput", key: "ops_per_sec", label: "calls/s (schedule+cancel+reset)", better: "higher",
			value: always(func(r *Result) float64 { return r.OpsPerSec }),
			show:  func(r *Result) string { return units.SI(r.OpsPerSec) }},
		{group: "throughput", label: "timers fired/s",
			value: always(func(r *Result) float64 { return r.FiredPerSec }),
			show:  func(r *Result) string { return units.SI(r.FiredPerSec) }},
		{group: "cost", key: "cpu", label: "CPU time (cores busy)", better: "lower",
			value: always(func(r *Result) float64 { return float64(r.CPU) }),
			show: func(r *Result) string {
				return fmt.Sprintf("%s (%s)", units.Duration(r.CPU), units.Sig(r.CPU.Seconds()/r.Measured.Seconds()))
			}},
		{group: "cost", key: "cpu_per_op", label: "CPU per call", better: "lower",
			value: always(func(r *Result) float64 { return r.CPUPerOp }),
			show:  func(r *Result) string { return units.Duration(time.Duration(r.CPUPerOp)) }},
	}
	if library {
		ms = append(ms,
			libraryRow("library_cpu", "library CPU (cores)", func(r *Result, l *libraryCPU) (float64, string) {
				cores := l.CPU.Seconds() / r.Measured.Seconds()
				return cores, units.Sig(cores)
			}),
			libraryRow("library_cpu_per_op", "library CPU per call", func(_ *Result, l *libraryCPU) (float64, string) {
				return l.PerOp, units.Duration(time.Duration(l.PerOp))
			}))
	}
	ms = append(ms, []metric[Result]{
		{group: "cost", key: "bytes_per_timer", label: "heap per resident timer", better: "lower",
			value: always(func(r *Result) float64 { return r.BytesPerTimer }),
			show:  func(r *Result) string { return fmt.Sprintf("%.0f B", r.BytesPerTimer) }},
		{group: "cost", label: "resident timers",
			value: always(func(r *Result) float64 { return float64(r.Resident) }),
			show:  func(r *Result) string { return units.SI(float64(r.Resident)) }},
		{group: "cost", key: "gc_cpu", label: "GC CPU time", better: "lower",
			value: always(func(r *Result) float64 { return float64(r.GC.CPU) }),
			show:  func(r *Result) string { return units.Duration(r.GC.CPU) }, noise: resultGCNoise},
		{group: "cost", key: "gc_cycles", label: "GC cycles", better: "lower",
			value: always(func(r *Result) float64 { return float64(r.GC.Cycles) }),
			show:  func(r *Result) string { return fmt.Sprint(r.GC.Cycles) }, noise: resultGCNoise},
		{group: "cost", key: "gc_pause_total", label: "GC pauses, total (max)", better: "lower",
			value: always(func(r *Result) float64 { return float64(r.GC.PauseSum) }),
			show: func(r *Result) string {
				return fmt.Sprintf("%s (%s)", units.Duration(r.GC.PauseSum), units.Duration(r.GC.PauseMax))
			}, noise: resultGCNoise},
	}...)
	ms = append(ms, latencyRows("latency", "lateness", "lateness", func(r *Result) *hist.Percentiles { return &r.Lateness })...)
	// shardwheel's own figures have no AfterFunc counterpart, hence no
	// ratio: one row each is enough.
	ms = append(ms,
		summaryRow("latency", "tick lag p50/p99/p99.9/max", func(r *Result) *hist.Percentiles { return r.TickLag }),
		summaryRow("latency", "Stats lateness p50/p99/p99.9/max", func(r *Result) *hist.Percentiles { return r.WheelLateness }))
	return ms
}

// gcNoiseOf says why GC figures of c cycles are too few to rate, or "".
func gcNoiseOf(c gcCost) string {
	if c.Cycles < minGCCycles {
		return plural(int(c.Cycles), "GC cycle")
	}
	return ""
}

func resultGCNoise(r *Result) string { return gcNoiseOf(r.GC) }

// ratios returns a / b for every metric of rows both have, by key.
func ratios[R any](rows []metric[R], a, b *R) map[string]float64 {
	out := map[string]float64{}
	for _, m := range rows {
		if m.key == "" {
			continue
		}
		va, oka := m.value(a)
		vb, okb := m.value(b)
		if oka && okb && vb != 0 {
			out[m.key] = va / vb
		}
	}
	return out
}
