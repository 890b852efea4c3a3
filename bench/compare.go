package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Comparison is the outcome of compare: the same load, with the same
// seed, against shardwheel, alone (null) and against time.AfterFunc in
// one process.
type Comparison struct {
	Command string `json:"command"`
	Host    Host   `json:"host"`
	Load    Load   `json:"load"`
	// Results are shardwheel's and time.AfterFunc's, with their Library
	// set when LoadAlone was measured.
	Results []Result `json:"results"`
	// LoadAlone is the run of the load through null, which does no timer
	// work: its CPU per call is what Library subtracts. It holds no
	// timers, so its lateness is empty and its heap and resident count
	// are the load's bookkeeping only.
	LoadAlone *Result `json:"load_alone,omitempty"`
	// Keyed is set when both implementations were driven by key (-keyed).
	Keyed bool `json:"keyed,omitempty"`
	// Ratios are shardwheel / time.AfterFunc by metric; whether below 1
	// is better depends on the metric (see the text report).
	Ratios      map[string]float64 `json:"ratios,omitempty"`
	Interrupted bool               `json:"interrupted"`
}

// compare runs o's load against shardwheel, alone, then against
// time.AfterFunc, one after the other: the load alone runs between the
// two it is subtracted from, so that a slow spell of the host over the
// three runs weighs on both subtractions alike. When ctx is done it
// returns what was measured so far.
func compare(ctx context.Context, o options, p *progress) (*Comparison, error) {
	c := &Comparison{Command: "compare", Host: host(), Load: o.load, Keyed: o.keyed}
	spec := runSpec{load: o.load, shards: o.shards, tick: o.tick, affinity: o.affinity, keyed: o.keyed, progress: p}
	for _, run := range []func(context.Context, runSpec) (Result, error){runWheel, runNull, runStdlib} {
		if ctx.Err() != nil {
			break
		}
		r, err := run(ctx, spec)
		if err != nil {
			return c, err
		}
		switch {
		case r.Measured == 0:
		case r.Impl == nameNull:
			c.LoadAlone = &r
		default:
			c.Results = append(c.Results, r)
		}
		settle()
	}
	c.Interrupted = ctx.Err() != nil
	if c.LoadAlone != nil {
		for i := range c.Results {
			c.Results[i].Library = libraryCost(&c.Results[i], c.LoadAlone)
		}
	}
	if len(c.Results) == 2 {
		c.Ratios = ratios(reportRows(true), &c.Results[0], &c.Results[1])
	}
	return c, nil
}

// settle returns the previous run's memory, so that the next run starts
// from the same heap and does not pay for its predecessor's garbage.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// find returns the result of impl, or nil if it was not measured.
func (c *Comparison) find(impl string) *Result {
	for i := range c.Results {
		if c.Results[i].Impl == impl {
			return &c.Results[i]
		}
	}
	return nil
}

// writeText writes the comparison as a table with notes.
func (c *Comparison) writeText(w io.Writer) error {
	sw, af := c.find(nameWheel), c.find(nameStdlib)
	var b strings.Builder
	fmt.Fprintf(&b, "shardwheel vs time.AfterFunc on %s\n", c.Host)
	c.Load.describe(&b)
	fmt.Fprintf(&b, "measured %v per implementation and for the load alone, after %v warm-up each; %d load goroutines; seed %d",
		c.Load.Duration, c.Load.Warmup, c.Load.Workers, c.Load.Seed)
	if sw != nil {
		fmt.Fprintf(&b, "; shardwheel: %d shards, tick %v%s", sw.Shards, sw.Tick, affinityNote(sw.Affinity))
	}
	if c.Keyed {
		b.WriteString("\nby key: shardwheel's ScheduleKey/CancelKey/ResetKey; time.AfterFunc through a sync.Map of timers")
	}
	b.WriteString("\n\n")

	t := &table{align: "lrrrl"}
	t.add("", nameWheel, nameStdlib, "ratio", "better")
	addRows(t, reportRows(true), c.Ratios, sw, af)
	if err := t.write(&b); err != nil {
		return err
	}
	if r := c.LoadAlone; r != nil {
		fmt.Fprintf(&b, "load alone (no timer work): CPU %s (%s cores busy), %s calls/s, %s per call\n",
			units.Duration(r.CPU), units.Sig(r.CPU.Seconds()/r.Measured.Seconds()), units.SI(r.OpsPerSec),
			units.Duration(time.Duration(r.CPUPerOp)))
	}
	b.WriteString("\n")
	for _, n := range c.notes(sw, af) {
		b.WriteString(n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// addRows adds rows to t under their group headings: one column per
// result (nil for one not measured), then the ratio and which way is
// better.
func addRows[R any](t *table, rows []metric[R], ratios map[string]float64, results ...*R) {
	group := ""
	for _, m := range rows {
		if m.group != group {
			group = m.group
			t.add(group)
		}
		cells := []string{"  " + m.label}
		for _, r := range results {
			cells = append(cells, cell(m, r))
		}
		ratio := ""
		if r, ok := ratios[m.key]; ok {
			ratio = fmt.Sprintf("%.2f", r)
		}
		t.add(append(cells, ratio, m.better)...)
	}
}

// cell shows m for r, or "-" when r was not measured.
func cell[R any](m metric[R], r *R) string {
	if r == nil {
		return "-"
	}
	return m.show(r)
}

// notes explain how to read the table, and what went wrong if anything.
func (c *Comparison) notes(sw, af *Result) []string {
	notes := []string{
		"ratio = shardwheel / time.AfterFunc; \"better\" is the direction that wins.",
		"Same offered load for both (open loop, paced every 1ms): calls/s match unless one fell behind.",
		"CPU is the whole process, load generator included (identical work for both).",
		"Library CPU: CPU per call less the load alone's (the same load through a null implementation, which",
		"  does no timer work), times the run's calls. Per call, because the load makes more calls against a",
		"  real implementation (it re-issues the background requests that time out) than alone (nothing fires).",
		"  It includes the bodies of the tasks that fire: the same for both.",
		"Heap per timer: live heap with the timers resident, less the heap before the run and the load's",
		"  handle tables; it includes each timer's task closure (identical for both).",
		"Lateness: task start - (clock read before the schedule call + delay), measured in every task of both.",
	}
	if sw != nil {
		notes = append(notes,
			fmt.Sprintf("shardwheel files timers on a %v tick grid, rounding up: by design it runs them up to a tick", sw.Tick),
			"  late, plus its tick lag. Tick lag and Stats lateness (against the deadline's tick, so up to a tick less",
			"  than what tasks see) come from its Stats; go run ./bench tune shows the trade-off of shorter ticks.")
	}
	for _, r := range []*Result{sw, c.LoadAlone, af} {
		if r == nil {
			continue
		}
		if l := r.Library; l != nil && l.Noise {
			notes = append(notes, fmt.Sprintf("NOISE: %s's library CPU per call, %s, is below %.0f%% of the load alone's, so it has no ratio: within what two runs",
				r.Impl, units.Duration(time.Duration(l.PerOp)), 100*noiseShare),
				fmt.Sprintf("  of one load differ by on a shared host, or the load's fixed cost (pacing every 1ms) weighing more per call alone (%s calls/s, against %s).",
					units.SI(c.LoadAlone.OpsPerSec), units.SI(r.OpsPerSec)))
		}
		if !r.KeptUp {
			notes = append(notes, fmt.Sprintf("WARNING: %s could not keep up: it issued %.0f%% of the offered %s requests/s (fell up to %v behind); its figures are for the load it managed.",
				r.Impl, 100*r.AchievedRate/r.TargetRate, units.SI(r.TargetRate), units.Duration(r.MaxBacklog)))
		}
		if n := busyNote(r, c.Host.NumCPU); n != "" {
			notes = append(notes, n)
		}
		if r.Partial {
			notes = append(notes, fmt.Sprintf("INTERRUPTED: %s was measured for %v only.", r.Impl, units.Duration(r.Measured)))
		}
	}
	if c.Interrupted {
		for _, r := range []struct {
			name string
			res  *Result
		}{{nameWheel, sw}, {nameNull, c.LoadAlone}, {nameStdlib, af}} {
			if r.res == nil {
				notes = append(notes, fmt.Sprintf("INTERRUPTED: %s was not measured.", r.name))
			}
		}
	}
	return notes
}

// busyNote warns when other processes used a good part of the host's CPUs
// during r's window, or returns "".
func busyNote(r *Result, numCPU int) string {
	if r.Measured == 0 {
		return ""
	}
	busy := r.OtherCPU.Seconds() / r.Measured.Seconds()
	if busy < max(0.25, 0.1*float64(numCPU)) {
		return ""
	}
	return fmt.Sprintf("WARNING: other processes kept %s of %d CPUs busy during the %s run: expect inflated latencies.",
		units.Sig(busy), numCPU, r.Impl)
}
