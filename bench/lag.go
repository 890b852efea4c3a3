package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/profiling"
)

// LagRun is the outcome of lag: shardwheel under the load, with a
// profiling.Capture over the measured window.
type LagRun struct {
	Command string  `json:"command"`
	Host    Host    `json:"host"`
	Load    Load    `json:"load"`
	Result  *Result `json:"result,omitempty"`
	// Disturbances are those -disturb injected, with their times into
	// the capture, to hold the diagnosis against.
	Disturbances []Disturbance `json:"disturbances,omitempty"`
	// Diagnosis is the capture's (profiling.Report.Diagnosis): findings
	// on lateness and tick lag up to their maximum, then the spikes that
	// lost the most time, each with its time into the capture and cause.
	Diagnosis   []string      `json:"diagnosis,omitempty"`
	Files       *captureFiles `json:"files,omitempty"`
	Interrupted bool          `json:"interrupted"`
	summary     string
}

// captureFiles are the paths of a profiling.Report.
type captureFiles struct {
	Dir     string `json:"dir"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	JSON    string `json:"json"`
	Profile string `json:"profile"`
	Trace   string `json:"trace,omitempty"`
}

// defaultLagDir is where lag writes when -out is not given: under the
// current directory, which from the repository root is ignored by git.
func defaultLagDir(now time.Time) string {
	return filepath.Join("bench", "out", "lag-"+now.Format("20060102-150405"))
}

// lag runs o's load against shardwheel and captures a profile and report
// of the measured window into o.out.
func lag(ctx context.Context, o options, p *progress) (*LagRun, error) {
	doc := &LagRun{Command: "lag", Host: host(), Load: o.load}
	// The live page's listener opens before the run, so that its address
	// (a port of 0 picks one) is known and said before the progress line
	// starts; it serves during the measured window.
	var ln net.Listener
	if o.serve != "" {
		var err error
		if ln, err = new(net.ListenConfig).Listen(ctx, "tcp", o.serve); err != nil {
			return doc, fmt.Errorf("-serve: %w", err)
		}
		defer ln.Close()
		p.note("  the live page, during the measured window: http://%s/", ln.Addr())
	}
	capture := func(ctx context.Context, s *shardwheel.Scheduler, d time.Duration) error {
		if ln != nil {
			srv := &http.Server{Handler: profiling.Handler(s), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(ln) }() // ErrServerClosed once Close below ends it
			defer srv.Close()
		}
		if len(o.disturb) > 0 {
			doc.Disturbances = planDisturb(o.disturb, d)
			ctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { disturb(ctx, s, time.Now(), doc.Disturbances) })
			defer wg.Wait()
			defer cancel()
		}
		rep, err := profiling.Capture(ctx, s, profiling.CaptureConfig{Duration: d, Dir: o.out, Trace: o.trace})
		if rep != nil {
			doc.Files = &captureFiles{Dir: rep.Dir, Text: rep.TextPath, HTML: rep.HTMLPath, JSON: rep.JSONPath, Profile: rep.ProfilePath, Trace: rep.TracePath}
			doc.summary = rep.Summary
			doc.Diagnosis = rep.Diagnosis
		}
		if errors.Is(err, context.Canceled) {
			return nil // the run reports the interruption
		}
		return err
	}
	r, err := runWheel(ctx, runSpec{load: o.load, shards: o.shards, tick: o.tick, affinity: o.affinity, keyed: o.keyed, progress: p, window: capture})
	if r.Measured > 0 {
		doc.Result = &r
	}
	doc.Interrupted = ctx.Err() != nil
	return doc, err
}

// writeText writes the run's figures, the capture's summary and where
// its files are.
func (l *LagRun) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "shardwheel under load on %s\n", l.Host)
	l.Load.describe(&b)
	if r := l.Result; r != nil {
		fmt.Fprintf(&b, "measured %v after %v warm-up; shardwheel: %s, tick %v%s\n\n", units.Duration(r.Measured), l.Load.Warmup, plural(r.Shards, "shard"), r.Tick, affinityNote(r.Affinity))
		if err := resultTable(r).write(&b); err != nil {
			return err
		}
	}
	if len(l.Disturbances) > 0 {
		b.WriteString("\ndisturbances injected (-disturb), to hold the diagnosis against:\n")
		for _, d := range l.Disturbances {
			fmt.Fprintf(&b, "  - %s\n", d)
		}
	}
	if l.summary != "" {
		b.WriteString("\n" + strings.TrimRight(l.summary, "\n") + "\n")
	}
	if f := l.Files; f != nil {
		fmt.Fprintf(&b, "\nwritten to %s:\n", f.Dir)
		fmt.Fprintf(&b, "  report  %s (open in a browser)\n", f.HTML)
		fmt.Fprintf(&b, "  profile %s (go tool pprof -http=: %s)\n", f.Profile, f.Profile)
		fmt.Fprintf(&b, "  summary %s, series %s\n", f.Text, f.JSON)
		if f.Trace != "" {
			fmt.Fprintf(&b, "  trace   %s (go tool trace %s; regions of type shardwheel.pass are the passes)\n", f.Trace, f.Trace)
		}
	}
	if l.Result != nil {
		if n := busyNote(l.Result, l.Host.NumCPU); n != "" {
			b.WriteString(n + "\n")
		}
	}
	if l.Interrupted {
		b.WriteString("INTERRUPTED: the figures cover the time measured before the interruption.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// resultTable shows one result with the comparison's rows.
func resultTable(r *Result) *table {
	t := &table{}
	group := ""
	for _, m := range reportRows(false) {
		if m.group != group {
			group = m.group
			t.add(group)
		}
		t.add("  "+m.label, m.show(r))
	}
	return t
}
