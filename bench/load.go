package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/shardwheel/shardwheel/internal/units"
)

// Load is the offered load, shaped like a proxy's timeouts:
//
//   - Requests arrive at Rate per second. Each schedules a request timeout,
//     keyed by request id, with a delay drawn uniformly from
//     [DelayMin, DelayMax]. A fraction Cancel of them get their response
//     after a time drawn uniformly from [RespMin, RespMax], which cancels
//     the timeout; the others time out (their task runs).
//   - Conns connections each hold an idle timer of Idle, Reset on every
//     read; reads arrive at ResetRate per second, spread at random over
//     the connections. A connection whose idle timer ran is reopened by
//     its next read.
//   - Resident timers are in flight from the first measured second: the
//     stream's own steady state is prefilled, and if Resident asks for
//     more, the rest are background requests (long polls, streams) that
//     time out and are re-issued at once, so the count stays flat. The
//     stream alone cannot hold many: by Little's law 300k requests/s keep
//     about 260k timers (the 5% that time out live 15.5s on average).
//
// The load is open loop: each worker issues what is due for the elapsed
// time, every millisecond, whatever the timers under test are doing, so
// both implementations get the same offered load.
//
// JSON durations are integer nanoseconds.
type Load struct {
	Rate      float64       `json:"rate"`
	Resident  int           `json:"resident"`
	Cancel    float64       `json:"cancel"`
	DelayMin  time.Duration `json:"delay_min_ns"`
	DelayMax  time.Duration `json:"delay_max_ns"`
	RespMin   time.Duration `json:"resp_min_ns"`
	RespMax   time.Duration `json:"resp_max_ns"`
	Conns     int           `json:"conns"`
	Idle      time.Duration `json:"idle_ns"`
	ResetRate float64       `json:"reset_rate"`
	Warmup    time.Duration `json:"warmup_ns"`
	Duration  time.Duration `json:"duration_ns"`
	Workers   int           `json:"workers"`
	Seed      uint64        `json:"seed"`
}

// defaultLoad is what `go run ./bench` offers. On a quiet 2-core host
// both implementations kept up with 1.5M requests/s at about one core;
// 300k/s takes a third of a core, so both keep up even on a busy host
// and the comparison is of costs, not of who falls over. 10s measured per
// run keeps compare's three runs (shardwheel, the load alone, AfterFunc)
// within about 45 seconds, and the whole default compare, churn section
// included, under three minutes.
func defaultLoad() Load {
	return Load{
		Rate:      300_000,
		Resident:  1_000_000,
		Cancel:    0.95,
		DelayMin:  time.Second,
		DelayMax:  30 * time.Second,
		RespMin:   2 * time.Millisecond,
		RespMax:   200 * time.Millisecond,
		Conns:     50_000,
		Idle:      10 * time.Second,
		ResetRate: 100_000,
		Warmup:    2 * time.Second,
		Duration:  10 * time.Second,
		Seed:      1,
	}
}

// population is how the resident timers split between the load's parts
// at steady state (Little's law: count = arrival rate × time resident).
type population struct {
	// inflight is the requests waiting for their response.
	inflight int
	// streaming is the stream's requests that will time out.
	streaming int
	// background is the re-issued requests that make up the rest of
	// Load.Resident.
	background int
	// conns is the idle timers.
	conns int
}

// population returns the steady-state split of l's resident timers.
func (l Load) population() population {
	meanDelay := (l.DelayMin + l.DelayMax).Seconds() / 2
	meanResp := (l.RespMin + l.RespMax).Seconds() / 2
	p := population{
		inflight:  int(l.Rate * l.Cancel * meanResp),
		streaming: int(l.Rate * (1 - l.Cancel) * meanDelay),
		conns:     l.Conns,
	}
	p.background = max(l.Resident-p.inflight-p.streaming-p.conns, 0)
	return p
}

func (p population) total() int { return p.inflight + p.streaming + p.background + p.conns }

// describe writes the load for report headers, one part per line.
func (l Load) describe(b *strings.Builder) {
	p := l.population()
	fmt.Fprintf(b, "load: %s requests/s, each with a timeout of %v-%v; %.0f%% answered after %v-%v (timeout cancelled)\n",
		units.SI(l.Rate), l.DelayMin, l.DelayMax, l.Cancel*100, l.RespMin, l.RespMax)
	fmt.Fprintf(b, "      %s timers resident", units.SI(float64(p.total())))
	if p.background > 0 {
		fmt.Fprintf(b, " (%s of them background requests, re-issued when they time out)", units.SI(float64(p.background)))
	}
	b.WriteString("\n")
	if l.Conns > 0 {
		fmt.Fprintf(b, "      %s connections, idle timeout %v, reset by %s reads/s\n", units.SI(float64(l.Conns)), l.Idle, units.SI(l.ResetRate))
	}
}

// split divides the load between n workers: rates and counts are shared
// out, the rest is copied.
func (l Load) split(n int) []Load {
	out := make([]Load, n)
	for i := range out {
		s := l
		s.Rate /= float64(n)
		s.ResetRate /= float64(n)
		s.Resident = part(l.Resident, n, i)
		s.Conns = part(l.Conns, n, i)
		s.Workers = 1
		out[i] = s
	}
	return out
}

// part is the i-th of n near-equal parts of total.
func part(total, n, i int) int {
	p := total / n
	if i < total%n {
		p++
	}
	return p
}
