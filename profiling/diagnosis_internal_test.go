package profiling

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

const (
	ms = time.Millisecond
	us = time.Microsecond
)

// quiet is an interval with nothing late, at a 1ms tick: 250 ticks, the
// timers on time, passes of a few microseconds, tasks of less.
func quiet(at time.Duration) sample {
	return sample{
		At: at, Span: 250 * ms, Ticks: 250,
		TickLag:  dist{P50: 300 * us, P99: 900 * us, Max: ms, Mean: 400 * us, Count: 250},
		Lateness: dist{P50: 400 * us, P99: ms, Max: 1200 * us, Mean: 500 * us, Count: 250},
		PassTime: dist{P50: 5 * us, P99: 30 * us, Max: 60 * us, Mean: 8 * us, Count: 250},
		TaskTime: dist{P50: 500, P99: 2000, Max: 5000, Mean: 600, Count: 100},
		Proc:     procDelta{SchedMax: 200 * us, SchedP99: 100 * us, SchedCount: 500, HostKnown: true, ThreadWait: 300 * us},
	}
}

// late makes s a spike: timers and ticks late by d at worst, p99 too.
func late(s *sample, d time.Duration) {
	s.TickLag.Max, s.TickLag.P99, s.Lateness.Max, s.Lateness.P99 = d, d*3/4, d, d*3/4
	s.Lost = 100 * d
}

// Each cause the figures can show, in an interval built for it, and the
// words the diagnosis uses for it: the spike's causes, exactly.
func TestExplain(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		s      func(s *sample)
		prev   func(s *sample) // the interval before, when it matters
		causes []cause
		want   []string
	}{
		// The operators' first case: one task that blocks 200ms, on a
		// busy host; the shards on time, its key's later timers held
		// behind it: no CPU's fault.
		"a key's timers waited behind its blocked task": {
			s: func(s *sample) {
				late(s, 200*ms)
				s.TickLag.Max, s.TickLag.P99 = ms, 900*us
				s.PassTime.Max = 80 * us
				s.Proc.ThreadWait, s.Proc.OtherCores = 200*ms, 1.6
				s.BlockedRuns = 1
				s.Blocked = []stats.BlockedTask{{Key: 7, Keyed: true, Func: "main.slow", Running: 150 * ms}}
			},
			causes: []cause{causeTasks},
			want: []string{"waiting behind a blocked task: the longest still running is main.slow",
				"the later timers of a blocked task's key wait for it (tasks ran up to 200ms late while ticks started at most 1ms late)"},
		},
		"a blocked task that returned in the interval": {
			s: func(s *sample) {
				late(s, 60*ms)
				s.TickLag.Max = ms
				s.BlockedRuns = 2
			},
			causes: []cause{causeTasks},
			want:   []string{"waiting behind a blocked task: 2 tasks held up the tasks behind them for WithBlockedAfter and returned"},
		},
		// A shard goroutine that lost its CPU mid-pass.
		"a CPU stall in a pass": {
			s: func(s *sample) {
				late(s, 25*ms)
				s.PassTime.Max = 24 * ms
				s.Proc.SchedMax, s.Proc.SchedP99 = 16*ms, 8*ms
			},
			causes: []cause{causeCPU},
			want: []string{"waiting for a CPU: a pass took 24ms with too little work counted to explain it",
				"runnable goroutines waited up to 16ms for a P (p99 8ms"},
		},
		"ticks started late, goroutines waited for a P": {
			s: func(s *sample) {
				late(s, 30*ms)
				s.PassTime.Max = 1400 * us
				s.Proc.SchedMax = 20 * ms
			},
			causes: []cause{causeCPU},
			want:   []string{"waiting for a CPU: timers ran up to 30ms late and ticks started up to 30ms late while no pass took over 1.4ms", "up to 20ms for a P"},
		},
		"ticks started late, the host busy": {
			s: func(s *sample) {
				late(s, 30*ms)
				s.PassTime.Max = 100 * us
				s.Proc.ThreadWait, s.Proc.OtherCores = 80*ms, 1.9
			},
			causes: []cause{causeCPU},
			want:   []string{"threads waited 80ms in all on the OS's run queues while other processes kept 1.9 of", "(a busy host)"},
		},
		// Goroutines on every P, the shard's timer run only when one
		// is preempted: the runtime's latencies show short waits, the
		// process's CPU time shows the Ps saturated.
		"ticks started late, the Ps saturated": {
			s: func(s *sample) {
				late(s, 58*ms)
				s.PassTime.Max = 45 * us
				s.Proc.SchedMax, s.Proc.ThreadWait, s.Proc.Saturation, s.Proc.Procs = 2600*us, 20*ms, 0.97, 2
			},
			causes: []cause{causeCPU},
			want: []string{"waiting for a CPU: timers ran up to 58ms late",
				"the process used 97% of the CPU time its 2 Ps offered", "kept every P busy"},
		},
		"ticks started late, the Ps short of saturated": {
			s: func(s *sample) {
				late(s, 58*ms)
				s.PassTime.Max = 45 * us
				s.Proc.SchedMax, s.Proc.ThreadWait, s.Proc.Saturation = 2600*us, 20*ms, 0.8
			},
			causes: []cause{causeUnknown},
			want:   []string{"the figures cannot tell why", "the Ps 80% busy"},
		},
		// A runner preempted in a no-op task on saturated Ps: the task
		// counts as blocked, but the CPU held it.
		"a task preempted past WithBlockedAfter on saturated Ps": {
			s: func(s *sample) {
				late(s, 77*ms)
				s.TickLag.Max, s.TickLag.P99 = 36*ms, 36*ms
				s.PassTime.Max = 138 * us
				s.BlockedRuns = 1
				s.Proc.SchedMax, s.Proc.Saturation = 2*ms, 0.98
			},
			causes: []cause{causeCPU, causeTasks},
			want: []string{"waiting for a CPU: timers ran up to 77ms late and ticks started up to 36ms late, and a task " +
				"preempted past WithBlockedAfter counts as blocked", "kept every P busy", "also waiting behind a blocked task"},
		},
		// The same on a busy host, the process's own CPU low: the
		// threads' run-queue wait is the host's, not busy Ps.
		"a blocked task that returned on a busy host": {
			s: func(s *sample) {
				late(s, 200*ms)
				s.TickLag.Max, s.TickLag.P99 = ms, 900*us
				s.PassTime.Max = 80 * us
				s.BlockedRuns = 1
				s.Proc.ThreadWait, s.Proc.OtherCores, s.Proc.Saturation, s.Proc.Procs = 200*ms, 1.6, 0.12, 1
			},
			causes: []cause{causeTasks},
		},
		"a task still blocked on saturated Ps": {
			s: func(s *sample) {
				late(s, 77*ms)
				s.TickLag.Max, s.TickLag.P99 = 36*ms, 36*ms
				s.Blocked = []stats.BlockedTask{{Key: 7, Keyed: true, Func: "main.slow", Running: 150 * ms}}
				s.Proc.Saturation = 0.98
			},
			causes: []cause{causeTasks},
		},
		// A GC cycle that ended in an interval of busy goroutines, its
		// share high, but no goroutine seen waiting: the Ps were busy.
		"saturated Ps with a GC cycle, no wait seen": {
			s: func(s *sample) {
				late(s, 40*ms)
				s.PassTime.Max = 200 * us
				s.Proc.SchedMax, s.Proc.GCCycles, s.Proc.GCShare, s.Proc.Saturation = 2*ms, 1, 0.45, 0.99
			},
			causes: []cause{causeCPU},
			want:   []string{"waiting for a CPU: timers ran up to 40ms late", "kept every P busy"},
		},
		"garbage collection took the CPU of saturated Ps": {
			s: func(s *sample) {
				late(s, 40*ms)
				s.PassTime.Max = 200 * us
				s.Proc.SchedMax, s.Proc.GCCycles, s.Proc.GCShare, s.Proc.Saturation = 16*ms, 9, 0.4, 0.99
			},
			causes: []cause{causeGC},
			want:   []string{"garbage collection: timers ran up to 40ms late", "meanwhile 9 GC cycles took 40% of the CPU"},
		},
		"garbage collection took the CPU": {
			s: func(s *sample) {
				late(s, 20*ms)
				s.PassTime.Max = 200 * us
				s.Proc.SchedMax, s.Proc.GCCycles, s.Proc.GCShare, s.Proc.GCPauseMax = 16*ms, 12, 0.4, 300*us
			},
			causes: []cause{causeGC},
			want:   []string{"garbage collection: timers ran up to 20ms late", "meanwhile 12 GC cycles took 40% of the CPU", "GOGC"},
		},
		"garbage collection took most of the CPU, waits sampled short": {
			// One scheduling in 8 is sampled: with the GC taking 60% of
			// the CPU, a wait a third as long as the delay names it.
			s: func(s *sample) {
				late(s, 66*ms)
				s.PassTime.Max = 4 * ms
				s.Proc.SchedMax, s.Proc.GCCycles, s.Proc.GCShare = 20*ms, 4, 0.6
			},
			causes: []cause{causeGC},
			want:   []string{"meanwhile 4 GC cycles took 60% of the CPU and goroutines waited up to 20ms for a P"},
		},
		"a GC pause": {
			s: func(s *sample) {
				late(s, 30*ms)
				s.PassTime.Max = 100 * us
				s.Proc.GCCycles, s.Proc.GCPauseMax, s.Proc.GCShare = 1, 25*ms, 0.05
			},
			causes: []cause{causeGC},
			want:   []string{"the GC stopped the world for up to 25ms"},
		},
		"GC running but goroutines busy": {
			// The GC's share is its usual: the wait is for busy
			// goroutines.
			s: func(s *sample) {
				late(s, 20*ms)
				s.PassTime.Max = 200 * us
				s.Proc.SchedMax, s.Proc.GCCycles, s.Proc.GCShare = 16*ms, 2, 0.08
			},
			causes: []cause{causeCPU},
		},
		"tasks waited behind a long task": {
			// The shards on time, no task past WithBlockedAfter: a task
			// of 50ms that was timed held up those behind it. Threads'
			// waits summed over the interval, short of half a thread
			// waiting all along, are no evidence against it.
			s: func(s *sample) {
				late(s, 52*ms)
				s.TickLag.Max = ms
				s.TaskTime.Max = 50 * ms
				s.Proc.ThreadWait, s.Proc.OtherCores = 120*ms, 1.5
			},
			causes: []cause{causeTasks},
			want:   []string{"waiting behind a task: tasks took up to 50ms, and the tasks handed to a runner behind one wait for it"},
		},
		"a task that allocates while the GC marks": {
			s: func(s *sample) {
				late(s, 122*ms)
				s.TickLag.Max = ms
				s.TaskTime.Max = 121 * ms
				s.Proc.GCCycles, s.Proc.GCShare = 1, 0.26
			},
			causes: []cause{causeTasks, causeGC},
			want:   []string{"; also garbage collection: 1 GC cycle took 26% of the CPU meanwhile, and a task that allocates helps the GC mark"},
		},
		"a burst beyond the cap": {
			s: func(s *sample) {
				late(s, 30*ms)
				s.CapHits, s.Queued = 12, 80000
			},
			causes: []cause{causeBurst},
			want:   []string{"a burst beyond the transfer cap: 12 ticks reached the cap", "WithTransferCap"},
		},
		"a pass that re-filed many timers": {
			s: func(s *sample) {
				late(s, 21*ms)
				s.PassTime.Max = 20 * ms
				s.SlowestPass = &stats.Pass{Duration: 20 * ms, Refiled: 100_000, Cascaded: 60_000, Fired: 3}
			},
			causes: []cause{causeCascade},
			want: []string{"a cascade: a pass of 20ms re-filed 100000 timers within the wheel (60000 of them by cascades, " +
				"the rest Resets found at their old slot), about 20ms of work"},
		},
		"a new peak of re-filed timers": {
			s: func(s *sample) {
				late(s, 21*ms)
				s.PassTime.Max, s.RefiledPeak = 20*ms, 100_000
			},
			causes: []cause{causeCascade},
			want:   []string{"a cascade: a pass re-filed 100000 timers within the wheel, about 20ms of work"},
		},
		"a burst in one pass": {
			s: func(s *sample) {
				late(s, 21*ms)
				s.PassTime.Max = 20 * ms
				s.SlowestPass = &stats.Pass{Duration: 20 * ms, Transferred: 90_000}
			},
			causes: []cause{causeBurst},
			want:   []string{"a burst: a pass of 20ms took in 90000 new timers"},
		},
		"a pass of too little work and no wait shown": {
			s: func(s *sample) {
				late(s, 26*ms)
				s.PassTime.Max = 25 * ms
				s.SlowestPass = &stats.Pass{Duration: 25 * ms, Refiled: 300, Fired: 20}
			},
			causes: []cause{causeUnknown},
			want:   []string{"a pass took 25ms with too little work counted to explain it, and no wait that long shows", "cannot tell why"},
		},
		"ticks late and no wait shown": {
			s: func(s *sample) {
				late(s, 30*ms)
				s.PassTime.Max = 100 * us
			},
			causes: []cause{causeUnknown},
			want:   []string{"ticks started up to 30ms late while no pass took over 100µs, and no wait that long shows"},
		},
		"the tail of the stall before": {
			s: func(s *sample) {
				s.Lateness.Max, s.Lateness.P99, s.TickLag.Max, s.PassTime.Max, s.Lost = 300*ms, 200*ms, ms, 60*us, time.Second
			},
			prev: func(s *sample) {
				late(s, 440*ms)
				s.PassTime.Max = 300 * us
				s.Proc.SchedMax = 300 * ms
			},
			causes: []cause{causeCPU},
			want:   []string{"the tail of the stall at 0s-250ms into the capture: timers due during it ran late in this interval; that one points to waiting for a CPU"},
		},
		"a cascade beside a longer stall": {
			// The worst delay is a wait for a P; a pass that re-filed
			// many timers, a quarter as long, is named after it.
			s: func(s *sample) {
				late(s, 40*ms)
				s.PassTime.Max = 12 * ms
				s.Proc.SchedMax = 35 * ms
				s.SlowestPass = &stats.Pass{Duration: 12 * ms, Refiled: 400_000}
			},
			causes: []cause{causeCPU, causeCascade},
			want:   []string{"; also a cascade: a pass of 12ms re-filed 400000 timers"},
		},
		"the tail of a blocked task before": {
			// The key's timers held behind a blocked task run late in
			// the next interval too: their lateness is the task's,
			// whatever the host did.
			s: func(s *sample) {
				s.Lateness.Max, s.Lateness.P99, s.Lost = 43*ms, 30*ms, 100*ms
				s.Proc.ThreadWait, s.Proc.OtherCores = 200*ms, 1.6
			},
			prev: func(s *sample) {
				late(s, 50*ms)
				s.TickLag.Max = ms
				s.BlockedRuns = 1
			},
			causes: []cause{causeTasks},
			want:   []string{"the tail of the stall at 0s-250ms into the capture", "that one points to waiting behind a task"},
		},
		"lateness alone": {
			s: func(s *sample) {
				s.Lateness.Max, s.Lateness.P99 = 30*ms, 10*ms
			},
			causes: []cause{causeUnknown},
			want:   []string{"timers ran up to 30ms late and ticks started up to 1ms late while no pass took over 60µs, and no wait that long shows", "the figures cannot tell why"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			samples := []sample{quiet(250 * ms), quiet(500 * ms)}
			if c.prev != nil {
				c.prev(&samples[0])
			}
			c.s(&samples[1])
			spikes, _ := findSpikes(ms, samples)
			var sp *spike
			for i := range spikes {
				if spikes[i].sample == &samples[1] {
					sp = &spikes[i]
				}
			}
			require.NotNil(t, sp, "the interval is a spike")
			if c.prev == nil {
				require.Len(t, spikes, 1, "the quiet interval is no spike")
			}
			assert.Equal(t, c.causes, sp.causes)
			text := sp.text(func(s *sample) string { return "at " + offset(s.At-s.Span) + "-" + offset(s.At) + " into the capture" })
			assert.True(t, strings.HasPrefix(text, "at 250ms-500ms into the capture: "), text)
			for _, w := range c.want {
				assert.Contains(t, text, w)
			}
		})
	}
}

// Grading: an interval is a spike when its p99 is over the limit, or its
// worst over the incident limit; one whose worst alone is over the limit
// is a note, and the rest nothing. Spikes come most time lost first.
func TestSpikeGrading(t *testing.T) {
	t.Parallel()
	limit, incident := lateLimit(ms), incidentLimit(ms)
	require.Equal(t, 2*ms, limit)
	require.Equal(t, 22*ms, incident)
	mk := func(f func(s *sample)) sample {
		s := quiet(250 * ms)
		f(&s)
		return s
	}
	for name, c := range map[string]struct {
		s          sample
		spike, not bool
	}{
		"quiet":                         {quiet(250 * ms), false, false},
		"jitter: worst 8ms, p99 within": {mk(func(s *sample) { s.Lateness.Max, s.TickLag.Max = 8*ms, 3*ms }), false, true},
		"worst at the incident limit":   {mk(func(s *sample) { s.Lateness.Max = incident }), false, true},
		"worst over the incident limit": {mk(func(s *sample) { s.Lateness.Max = incident + us }), true, false},
		"lateness p99 over the limit":   {mk(func(s *sample) { s.Lateness.P99, s.Lateness.Max = limit+us, 3*ms }), true, false},
		"tick lag p99 over the limit":   {mk(func(s *sample) { s.TickLag.P99, s.TickLag.Max = limit+us, 3*ms }), true, false},
		// The p99 of fewer than 100 values is their maximum.
		"a few ticks, one late": {mk(func(s *sample) {
			s.TickLag.Count, s.TickLag.P99, s.TickLag.Max = 12, 3*ms, 3*ms
			s.Lateness.Count = 8
		}), false, true},
		"a few timers, one an incident": {mk(func(s *sample) { s.Lateness.Count, s.Lateness.P99, s.Lateness.Max = 8, 30*ms, 30*ms }), true, false},
	} {
		assert.Equal(t, c.spike, isSpike(&c.s, ms), name)
		assert.Equal(t, c.not, isNote(&c.s, ms), name)
	}

	var samples []sample
	for i, lost := range []time.Duration{0, 3 * time.Second, 0, 40 * ms, 0, 3 * time.Second} {
		s := quiet(time.Duration(i+1) * 250 * ms)
		if lost > 0 {
			late(&s, 30*ms)
			s.Lost = lost
		}
		if i == 5 {
			s.Lateness.Max = 35 * ms // as much lost as the second, and worse
		}
		samples = append(samples, s)
	}
	samples[2].Lateness.Max = 5 * ms // a note
	spikes, notes := findSpikes(ms, samples)
	require.Len(t, spikes, 3)
	assert.Equal(t, 1, notes)
	assert.Same(t, &samples[5], spikes[0].sample, "most lost, then the worse")
	assert.Same(t, &samples[1], spikes[1].sample)
	assert.Same(t, &samples[3], spikes[2].sample)
}

// The time lost above the limit sums, over the durations recorded, how
// far each went past it: none for those within. On a testing/synctest
// bubble's clock a task that sleeps 10ms makes the timers of the next
// five ticks run exactly 9, 8, 7, 6 and 5ms late: 25ms above a 2ms limit.
func TestLostAbove(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithTick(ms), shardwheel.WithBlockedAfter(0))
		require.NoError(t, err)
		defer s.Stop()
		var wg sync.WaitGroup
		wg.Add(6)
		_, err = s.AfterFunc(ms, func() { time.Sleep(10 * ms); wg.Done() })
		require.NoError(t, err)
		for k := 2; k <= 6; k++ {
			_, err = s.AfterFunc(time.Duration(k)*ms, wg.Done)
			require.NoError(t, err)
		}
		wg.Wait()
		synctest.Wait() // the pass that ran them has recorded them
		h := s.Stats().Total.Lateness
		require.EqualValues(t, 6, h.Count())
		assert.InDelta(t, float64(25*ms), float64(lostAbove(h, 2*ms)), float64(ms), "each within its bucket's half-width")
		assert.Zero(t, lostAbove(h, 10*ms), "none over 10ms")
	})
}

// The findings look past p99: a tail beyond the limit is not "ok", and
// says how far it went; the spikes say when and why.
func TestFindingsTail(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		lateness dist
		want     string
		ok       bool
	}{
		"all within": {dist{P99: 1200 * us, P999: 1500 * us, Max: 1900 * us, Count: 1000},
			"ok: lateness p99 1.2ms, p99.9 1.5ms and max 1.9ms are within one tick plus 1ms of timer slack (2ms)", true},
		"the max beyond": {dist{P99: 1200 * us, P999: 1500 * us, Max: 31 * ms, Count: 1000},
			"a few timers ran late: lateness p99 1.2ms and p99.9 1.5ms are within one tick plus 1ms of timer slack (2ms), but max is 31ms", false},
		"p99.9 beyond": {dist{P99: 1200 * us, P999: 23 * ms, Max: 31 * ms, Count: 1000},
			"the tail ran late: lateness p99 1.2ms is within one tick plus 1ms of timer slack (2ms), but p99.9 is 23ms and max 31ms", false},
		"p99 beyond": {dist{P99: 7 * ms, P999: 23 * ms, Max: 31 * ms, Count: 1000},
			"timers ran late: lateness p99 7ms, p99.9 23ms and max 31ms exceed one tick plus 1ms of timer slack (2ms)", false},
	} {
		t.Run(name, func(t *testing.T) {
			sm := &summary{tick: ms}
			sm.total.Fired = 1000
			sm.total.Lateness = c.lateness
			f := sm.findings()
			require.NotEmpty(t, f)
			assert.Equal(t, c.want, f[0].Text)
			assert.Equal(t, c.ok, f[0].OK)
		})
	}
}

// The slowest pass is put down to what took its time, by its own counts:
// moving timers, or not (its goroutine did not run; no task runs in a
// pass).
func TestStallCause(t *testing.T) {
	t.Parallel()
	assert.Contains(t, stallCause(stats.Pass{Duration: 20 * ms, Refiled: 90_000}), "moving timers took most of it (about 18ms)")
	assert.Contains(t, stallCause(stats.Pass{Duration: 155 * ms, Fired: 321}),
		"155ms of it was not moving timers: its goroutine was not running then")
}

// A spike is listed with its time, most time lost first, at most
// maxSpikes of them; the findings count them, name the cause of the one
// that lost the most, and count the routine jitter apart.
func TestSpikeLines(t *testing.T) {
	t.Parallel()
	var samples []sample
	for i := range 14 {
		s := quiet(time.Duration(i+1) * 250 * ms)
		switch {
		case i < 12 && i%2 == 1:
			late(&s, time.Duration(i+30)*ms)
			s.PassTime.Max = 100 * us
			s.Proc.SchedMax = 30 * ms
		case i >= 12:
			s.Lateness.Max = 5 * ms // jitter
		}
		samples = append(samples, s)
	}
	sm := &summary{
		tick: ms, intervals: len(samples), spikeScope: "of the capture",
		when: func(s *sample) string { return "at " + offset(s.At-s.Span) + "-" + offset(s.At) + " into the capture" },
	}
	sm.spikes, sm.notes = findSpikes(ms, samples)
	sm.total.Fired = 1
	sm.total.Lateness = dist{P99: ms, P999: ms, Max: 41 * ms, Count: 1000}
	lines := sm.spikeLines()
	require.Len(t, lines, maxSpikes+1)
	assert.True(t, strings.HasPrefix(lines[0], "at 2.75s-3s into the capture: 4.1s lost above the limit; lateness max 41ms"), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "at 2.25s-2.5s into the capture: 3.9s lost"), lines[1])
	assert.Equal(t, "1 more spike, smaller: see the charts", lines[maxSpikes])
	var texts []string
	for _, f := range sm.findings() {
		texts = append(texts, f.Text)
	}
	assert.Contains(t, texts, "6 of 14 intervals of the capture were spikes (tick lag or lateness p99 over 2ms (of 100 values or more), "+
		"or a value over 22ms); the one that lost the most, at 2.75s-3s into the capture, lost 4.1s and points to waiting for a CPU")
	assert.Contains(t, texts, "2 other intervals of the capture had a tick lag or lateness over 2ms, but neither a p99 over it "+
		"(of 100 values or more) nor a value over 22ms: routine jitter, not listed")
	d := sm.diagnosis()
	assert.Equal(t, "spike "+lines[0], d[len(d)-len(lines)])
	assert.Equal(t, lines[maxSpikes], d[len(d)-1], "the count of those left out is no spike line")
}

// The live page names an interval by its span, not its end, and says
// when one is too long to place its spike in, with when its slowest pass
// ended if known.
func TestSpanText(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 2, 33, 22, 0, time.UTC)
	s := sample{Span: 5 * time.Second, end: now.Add(-8 * time.Second)}
	assert.Equal(t, "at 02:33:09-02:33:14 (13s ago to 8s ago)", spanText(&s, now))
	s.end = now
	assert.Equal(t, "at 02:33:17-02:33:22 (5s ago to just now)", spanText(&s, now))
	s = sample{Span: 35 * time.Second, end: now, SlowestPass: &stats.Pass{Duration: 54 * ms, Ago: 30 * time.Second}}
	assert.Equal(t, "at 02:32:47-02:33:22 (35s ago to just now), an interval of 35s between the page's snapshots: too long "+
		"to say when in it the spike came (reload more often to place spikes closer); its slowest pass, 54ms, ended at 02:32:52",
		spanText(&s, now))
}
