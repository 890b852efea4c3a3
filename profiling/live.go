package profiling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
	"github.com/shardwheel/shardwheel/stats"
)

// badRequest answers 400 with err.
func badRequest(w http.ResponseWriter, err error) {
	http.Error(w, "profiling: "+err.Error(), http.StatusBadRequest)
}

// statsJSON is the body of /stats, documented at HandlerWith.
type statsJSON struct {
	Time            time.Time     `json:"time"`
	Window          time.Duration `json:"window_ns"`
	RequestedWindow time.Duration `json:"requested_window_ns"`
	WindowStats     stats.Stats   `json:"window"`
	SinceStart      stats.Stats   `json:"since_start"`
}

// serveStats writes the window and the totals as JSON.
func (h *handler) serveStats(w http.ResponseWriter, r *http.Request) {
	window, err := parseWindow(r.URL.Query())
	if err != nil {
		badRequest(w, err)
		return
	}
	o := h.recent.observe(window)
	b, err := json.MarshalIndent(statsJSON{
		Time:            o.cur.at.Round(0),
		Window:          o.window(),
		RequestedWindow: window,
		WindowStats:     o.cur.st.Sub(o.base.st),
		SinceStart:      o.cur.st,
	}, "", "  ")
	if err != nil {
		http.Error(w, "profiling: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// servePage writes the live page, as HTML or text by the Accept header.
func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	window, err := parseWindow(q)
	if err != nil {
		badRequest(w, err)
		return
	}
	refresh, err := parseRefresh(q)
	if err != nil {
		badRequest(w, err)
		return
	}
	o := h.recent.observe(window)
	win, total := h.summaries(&o, window)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept")
	if !wantsHTML(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(h.text(win, total, window, mountPrefix(r))) // a write error means the client went away
		return
	}
	page, err := h.html(&o, win, total, window, refresh)
	if err != nil {
		http.Error(w, "profiling: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// wantsHTML reports whether an Accept header prefers HTML to plain text:
// it lists text/html or application/xhtml+xml with a q-value above 0 and
// at least text/plain's. Browsers' headers do; curl's */* does not.
func wantsHTML(accept string) bool {
	qHTML, qText := 0.0, 0.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/html", "application/xhtml+xml":
			qHTML = max(qHTML, q)
		case "text/plain":
			qText = max(qText, q)
		}
	}
	return qHTML > 0 && qHTML >= qText
}

// mountPrefix returns the prefix an http.StripPrefix in front of the
// handler removed, so that the text page can print paths a reader can
// paste, or "" when there is none.
func mountPrefix(r *http.Request) string {
	full := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		full = u.Path
	}
	if p, ok := strings.CutSuffix(full, r.URL.Path); ok {
		return p
	}
	return ""
}

// summaries returns the summaries of the observation's window and of
// everything since s started.
func (h *handler) summaries(o *observation, window time.Duration) (win, total *summary) {
	tick, pending := h.s.Tick(), o.cur.st.Pending
	now := o.cur.at
	wt, ws := views(o.cur.st, o.base.st)
	span := time.Duration(0)
	if len(o.history) > 0 {
		span = now.Sub(o.history[0].end.Add(-o.history[0].Span))
	}
	win = &summary{
		tick: tick, pending: pending, elapsed: o.window(), total: wt, shards: ws,
		slowest: o.cur.st.Total.Recent.SlowestPass, slowestScope: "of the last minute",
		host:      procSub(o.cur.proc, o.base.proc, o.window()),
		intervals: len(o.history), spikeScope: "in the last " + units.Duration(span.Round(time.Second)),
		when: func(s *sample) string { return spanText(s, now) },
	}
	win.spikes, win.notes = findSpikes(tick, o.history)
	win.passWhen = func(ago time.Duration) string {
		if ago < time.Second {
			return "at " + now.Add(-ago).Format("15:04:05") + " (just now)"
		}
		return fmt.Sprintf("at %s (%s ago)", now.Add(-ago).Format("15:04:05"), units.Duration(ago.Round(time.Second)))
	}
	win.header = []string{fmt.Sprintf("== last %s ==", units.Duration(window))}
	if n := windowNote(o.window(), window); n != "" {
		win.header[0] = fmt.Sprintf("== last %s (asked for %s) ==", n, units.Duration(window))
	}
	tt, ts := views(o.cur.st, stats.Stats{})
	total = &summary{
		header: []string{"== since the scheduler started =="}, tick: tick, pending: pending, total: tt, shards: ts,
		slowest: o.cur.st.Total.SlowestPass, slowestScope: "since the scheduler started", passWhen: win.passWhen,
	}
	return win, total
}

// placeSpan is the longest interval of the page's history whose spike the
// page places by the interval alone: a longer one (the page was not
// reloaded for a while) gets a note.
const placeSpan = 15 * time.Second

// spanText names the interval of s on the live page, whose snapshot now
// is the latest: its start and end, with how long ago each was, and, for
// an interval too long to place a spike in (placeSpan), a note saying so,
// with when its slowest pass ended if the snapshots show it.
func spanText(s *sample, now time.Time) string {
	from := s.end.Add(-s.Span)
	ago := func(t time.Time) string {
		if d := now.Sub(t).Round(time.Second); d > 0 {
			return units.Duration(d) + " ago"
		}
		return "just now"
	}
	text := fmt.Sprintf("at %s-%s (%s to %s)", from.Format("15:04:05"), s.end.Format("15:04:05"), ago(from), ago(s.end))
	if s.Span <= placeSpan {
		return text
	}
	text += fmt.Sprintf(", an interval of %s between the page's snapshots: too long to say when in it the spike came "+
		"(reload more often to place spikes closer)", units.Duration(s.Span.Round(time.Second)))
	if sp := s.SlowestPass; sp != nil {
		text += fmt.Sprintf("; its slowest pass, %s, ended at %s", units.Duration(sp.Duration), s.end.Add(-sp.Ago).Format("15:04:05"))
	}
	return text
}

// windowNote says how long the window is when it differs from the one
// asked for by more than the kept snapshots' spacing explains, or "".
func windowNote(got, asked time.Duration) string {
	if d := got - asked; d > -asked/8-snapSpacing && d < asked/8+snapSpacing {
		return ""
	}
	if got < asked {
		return fmt.Sprintf("only %s: the oldest snapshot is that old (they are taken on requests; reload to extend)",
			units.Duration(got.Round(time.Millisecond)))
	}
	return fmt.Sprintf("%s: no request came between (snapshots are taken on requests)", units.Duration(got.Round(time.Millisecond)))
}

// text renders the text page; prefix is where the handler is mounted.
func (h *handler) text(win, total *summary, window time.Duration, prefix string) []byte {
	also := fmt.Sprintf("Also: %s/stats?window=%s (JSON), %s/debug/pprof/, %s/debug/fgprof?seconds=10",
		prefix, fmtBound(window), prefix, prefix)
	if h.metrics {
		also += ", " + prefix + "/metrics"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "shardwheel: %d shards, tick %s, %d pending\n", h.s.Shards(), units.Duration(h.s.Tick()), win.pending)
	fmt.Fprintf(&b, "The last %s, then since the scheduler started. ?window= takes a Go duration from %s to %s.\n%s\n\n",
		units.Duration(window), fmtBound(MinWindow), fmtBound(MaxWindow), also)
	_ = win.write(&b) // a bytes.Buffer does not fail
	b.WriteString("\n")
	_ = total.write(&b)
	return b.Bytes()
}

// windowChoices are the windows the HTML page links to.
var windowChoices = []time.Duration{DefaultWindow, 30 * time.Second, time.Minute, MaxWindow}

// refreshChoices are the reload periods the HTML page links to.
var refreshChoices = []time.Duration{2 * time.Second, defaultRefresh, 15 * time.Second, 0}

// html renders the HTML page.
func (h *handler) html(o *observation, win, total *summary, window, refresh time.Duration) ([]byte, error) {
	var text bytes.Buffer
	_ = win.write(&text)
	text.WriteString("\n")
	_ = total.write(&text)

	tick := h.s.Tick()
	got := o.window()
	w := fmtBound(window)
	query := func(win, ref time.Duration) string {
		q := "?window=" + fmtBound(win)
		switch ref {
		case defaultRefresh:
		case 0:
			q += "&refresh=0"
		default:
			q += "&refresh=" + fmtBound(ref)
		}
		return q
	}
	var windows, refreshes []navLink
	for _, c := range windowChoices {
		windows = append(windows, navLink{Href: query(c, refresh), Text: "last " + fmtBound(c), Current: c == window})
	}
	for _, c := range refreshChoices {
		t := "every " + fmtBound(c)
		if c == 0 {
			t = "off"
		}
		refreshes = append(refreshes, navLink{Href: query(window, c), Text: t, Current: c == refresh})
	}
	endpoints := []navLink{
		{Href: "stats?window=" + w, Text: "stats?window=" + w, Title: "this window and the totals as JSON"},
		{Href: "debug/pprof/", Text: "debug/pprof/", Title: "the Go profilers"},
		{Href: "debug/pprof/profile?seconds=30", Text: "debug/pprof/profile?seconds=30", Title: "a 30s CPU profile"},
		{Href: "debug/pprof/heap", Text: "debug/pprof/heap", Title: "a heap profile"},
		{Href: "debug/pprof/goroutine?debug=2", Text: "debug/pprof/goroutine?debug=2", Title: "every goroutine's stack"},
		{Href: "debug/pprof/trace?seconds=1", Text: "debug/pprof/trace?seconds=1", Title: "a 1s execution trace"},
		{Href: "debug/fgprof?seconds=10", Text: "debug/fgprof?seconds=10", Title: "a 10s wall-clock profile"},
	}
	if h.metrics {
		endpoints = append(endpoints, navLink{Href: "metrics", Text: "metrics", Title: "the metrics handler"})
	}

	sub := fmt.Sprintf("%d shards · tick %s · %d pending · %s · last %s",
		h.s.Shards(), units.Duration(tick), o.cur.st.Pending, o.cur.at.Format("2006-01-02 15:04:05 MST"), units.Duration(window))
	if n := windowNote(got, window); n != "" {
		sub += " (" + n + ")"
	} else {
		sub += fmt.Sprintf(" (measured %s)", units.Duration(got.Round(time.Millisecond)))
	}
	if refresh > 0 {
		sub += " · reloads every " + fmtBound(refresh)
	}
	rate := "0/s"
	if got > 0 {
		rate = units.Rate(float64(win.total.Fired) / got.Seconds())
	}
	wt, tt := win.total, total.total
	label := "last " + fmtBound(window)
	p := htmlPage{
		Title:    "shardwheel live",
		Subtitle: sub,
		Refresh:  int(refresh / time.Second),
		Nav: []navRow{
			{"window", windows},
			{"reload", refreshes},
			{"paths", endpoints},
		},
		Cards:        cards(&wt, tick, rate, o.cur.st.Pending),
		Findings:     win.findings(),
		LatencyTitle: "Latency: " + label + " and since the scheduler started",
		Latency: []latencyRow{
			latencyOf("tick lag, "+label, wt.TickLag, win.shards, func(v view) dist { return v.TickLag }),
			latencyOf("tick lag, since start", tt.TickLag, total.shards, func(v view) dist { return v.TickLag }),
			latencyOf("lateness, "+label, wt.Lateness, win.shards, func(v view) dist { return v.Lateness }),
			latencyOf("lateness, since start", tt.Lateness, total.shards, func(v view) dist { return v.Lateness }),
			latencyOf("pass time, "+label, wt.PassTime, win.shards, func(v view) dist { return v.PassTime }),
			latencyOf("pass time, since start", tt.PassTime, total.shards, func(v view) dist { return v.PassTime }),
			latencyOf("task time, "+label, wt.TaskTime, win.shards, func(v view) dist { return v.TaskTime }),
			latencyOf("task time, since start", tt.TaskTime, total.shards, func(v view) dist { return v.TaskTime }),
		},
		Config: [][2]string{
			{"shards", strconv.Itoa(h.s.Shards())},
			{"tick", units.Duration(tick)},
			{"window", fmt.Sprintf("%s asked, %s measured", units.Duration(window), units.Duration(got.Round(time.Millisecond)))},
			{"snapshots", fmt.Sprintf("%d kept, %d intervals charted", o.kept, len(o.history))},
			{"runtime", fmt.Sprintf("%s, GOMAXPROCS %d, %d CPUs", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())},
			{"host, " + label, hostLine(win.host)},
		},
		Summary: text.String(),
	}
	if len(win.spikes) > 0 {
		p.SpikesTitle = fmt.Sprintf("Spikes %s: intervals with %s, most time lost first", win.spikeScope, spikeRule(tick))
		p.Spikes = win.spikeLines()
	}

	now := o.cur.at
	span := 10.0
	if len(o.history) > 0 {
		first := &o.history[0]
		span = max(span, now.Sub(first.end).Seconds()+first.Span.Seconds())
	}
	ax := timeAxis{
		xMin: -span, xMax: 0, ticks: agoTicks(span), label: "time before now (s)",
		x:    func(s *sample) float64 { return -now.Sub(s.end).Seconds() },
		from: func(s *sample) float64 { return -(now.Sub(s.end) + s.Span).Seconds() },
	}
	distChart := htmlChart{template.HTML(distribution("Latency distribution: "+label+" and since start", tick, []curve{
		{"lateness, " + label, colorMax, "", wt.Shard.Lateness},
		{"lateness, since start", colorP99, "6 4", tt.Shard.Lateness},
		{"tick lag, " + label, colorP50, "", wt.Shard.TickLag},
		{"tick lag, since start", "#56b4e9", "6 4", tt.Shard.TickLag},
	}).svg()), "Lateness and tick lag by percentile, in the window and since the scheduler started, on a log scale that " +
		"spreads out the tail: read a curve's height at 99% for p99. A window's curve above the since-start one is an incident " +
		"the totals dilute."}
	p.Charts = timeCharts(ax, tick, o.history, win.spikes, win.when, distChart)
	for i := range p.Charts {
		if p.Charts[i].SVG != distChart.SVG {
			p.Charts[i].Caption += " One point per interval between the snapshots this page's requests took: the charts fill in as it reloads."
		}
	}

	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("render the page: %w", err)
	}
	return b.Bytes(), nil
}
