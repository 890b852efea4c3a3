package profiling

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

const ms = time.Millisecond

// quiet is an interval with nothing late, at a 1ms tick: 250 ticks, the
// timers on time, passes of a few microseconds.
func quiet(at time.Duration) sample {
	return sample{
		At: at, Span: 250 * ms, Ticks: 250,
		TickLag:  dist{P50: 300 * time.Microsecond, P99: 900 * time.Microsecond, Max: time.Millisecond, Mean: 400 * time.Microsecond, Count: 250},
		Lateness: dist{P50: 400 * time.Microsecond, P99: time.Millisecond, Max: 1200 * time.Microsecond, Mean: 500 * time.Microsecond, Count: 250},
		PassTime: dist{P50: 5 * time.Microsecond, P99: 30 * time.Microsecond, Max: 60 * time.Microsecond, Mean: 8 * time.Microsecond, Count: 250},
		TaskTime: dist{P50: 500, P99: 2000, Max: 5000, Mean: 600, Count: 100},
	}
}

// Each cause the counters can show, in an interval built for it, and the
// words the diagnosis uses for it.
func TestExplain(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		s      func(s *sample)
		prev   func(s *sample) // the interval before, when it matters
		causes []cause
		want   []string
	}{
		// The operators' case: a 31ms spike while the pass took 1.4ms.
		"waiting for a CPU": {
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.Lateness.P99, s.PassTime.Max = 30*ms, 31*ms, 23*ms, 1400*time.Microsecond
			},
			causes: []cause{causeCPU},
			want:   []string{"lateness max 31ms (p99 23ms), tick lag max 30ms, longest pass 1.4ms", "waiting for a CPU: ticks started up to 30ms late while no pass took over 1.4ms"},
		},
		"lost its CPU mid-pass": {
			s:      func(s *sample) { s.TickLag.Max, s.Lateness.Max, s.PassTime.Max = 25*ms, 26*ms, 25*ms },
			causes: []cause{causeCPU},
			want:   []string{"waiting for a CPU: passes took up to 25ms with no long task timed", "lost its CPU mid-pass"},
		},
		"a long task": {
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.PassTime.Max, s.TaskTime.Max = 24*ms, 25*ms, 25*ms, 24*ms
			},
			causes: []cause{causeTasks},
			want:   []string{"long tasks:", "ran 24ms", "WithExecutor"},
		},
		"many tasks": {
			// Each task is short, but a pass ran hundreds of them.
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.PassTime.Max = 40*ms, 45*ms, 40*ms
				s.TaskTime.Count, s.TaskTime.Mean, s.TaskTime.Max = 1000, 20*time.Microsecond, 50*time.Microsecond
				s.PassTime.Count, s.PassTime.Mean = 250, 200*time.Microsecond
			},
			causes: []cause{causeTasks},
			want:   []string{"long tasks: tasks took about 50ms of the passes' 50ms"},
		},
		"a burst beyond the cap": {
			s: func(s *sample) {
				s.Lateness.Max, s.CapHits, s.Queued = 30*ms, 12, 80000
			},
			causes: []cause{causeBurst},
			want:   []string{"a burst beyond the transfer cap: 12 ticks reached the cap", "WithTransferCap"},
		},
		"a cascade": {
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.PassTime.Max, s.RefiledPeak = 20*ms, 21*ms, 20*ms, 100_000
			},
			causes: []cause{causeCascade},
			want:   []string{"a cascade: one pass re-filed 100000 timers within the wheel, which takes about 20ms"},
		},
		"a burst in one pass": {
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.PassTime.Max = 20*ms, 21*ms, 20*ms
				s.SlowestPass = &shardwheel.PassWork{Duration: 20 * ms, Transferred: 90_000}
			},
			causes: []cause{causeBurst},
			want:   []string{"a burst: one pass took in 90000 new timers"},
		},
		"a CPU stall and a burst at once": {
			s: func(s *sample) {
				s.TickLag.Max, s.Lateness.Max, s.PassTime.Max, s.CapHits = 30*ms, 31*ms, 100*time.Microsecond, 2
			},
			causes: []cause{causeBurst, causeCPU},
			want:   []string{"a burst beyond the transfer cap: 2 ticks", "; also waiting for a CPU"},
		},
		"the tail of the stall before": {
			s:      func(s *sample) { s.Lateness.Max, s.TickLag.Max, s.PassTime.Max = 300*ms, 60*ms, 60*ms },
			prev:   func(s *sample) { s.TickLag.Max, s.Lateness.Max, s.PassTime.Max = 420*ms, 440*ms, 300*time.Microsecond },
			causes: []cause{causeCPU},
			want:   []string{"the tail of the stall at 0s-250ms into the capture: timers due during it ran late in this interval; that one points to waiting for a CPU"},
		},
		"no cause shown": {
			s:      func(s *sample) { s.Lateness.Max = 30 * ms },
			causes: []cause{causeUnknown},
			want:   []string{"the counters show no cause"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			samples := []sample{quiet(250 * ms), quiet(500 * ms)}
			if c.prev != nil {
				c.prev(&samples[0])
			}
			c.s(&samples[1])
			spikes := findSpikes(ms, samples)
			sp := spikes[len(spikes)-1]
			if c.prev == nil {
				require.Len(t, spikes, 1, "the quiet interval has no spike")
			}
			require.Same(t, &samples[1], sp.sample)
			assert.Equal(t, c.causes, sp.causes)
			text := sp.text(func(s *sample) string { return "at " + offset(s.At-s.Span) + "-" + offset(s.At) + " into the capture" })
			assert.True(t, strings.HasPrefix(text, "at 250ms-500ms into the capture: "), text)
			for _, w := range c.want {
				assert.Contains(t, text, w)
			}
		})
	}
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
		"all within": {dist{P99: 1200 * time.Microsecond, P999: 1500 * time.Microsecond, Max: 1900 * time.Microsecond, Count: 1000},
			"ok: lateness p99 1.2ms, p99.9 1.5ms and max 1.9ms are within one tick plus 1ms of timer slack (2ms)", true},
		"the max beyond": {dist{P99: 1200 * time.Microsecond, P999: 1500 * time.Microsecond, Max: 31 * ms, Count: 1000},
			"a few timers ran late: lateness p99 1.2ms and p99.9 1.5ms are within one tick plus 1ms of timer slack (2ms), but max is 31ms", false},
		"p99.9 beyond": {dist{P99: 1200 * time.Microsecond, P999: 23 * ms, Max: 31 * ms, Count: 1000},
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

// A spike is listed with its time, worst first, at most maxSpikes of
// them, and the findings count them and name the worst's cause.
func TestSpikeLines(t *testing.T) {
	t.Parallel()
	var samples []sample
	for i := range 12 {
		s := quiet(time.Duration(i+1) * 250 * ms)
		if i%2 == 1 {
			s.TickLag.Max, s.Lateness.Max, s.PassTime.Max = time.Duration(i+3)*ms, time.Duration(i+3)*ms, 100*time.Microsecond
		}
		samples = append(samples, s)
	}
	sm := &summary{
		tick: ms, spikes: findSpikes(ms, samples), intervals: len(samples), spikeScope: "of the capture",
		when: func(s *sample) string { return "at " + offset(s.At-s.Span) + "-" + offset(s.At) + " into the capture" },
	}
	sm.total.Fired = 1
	sm.total.Lateness = dist{P99: ms, P999: ms, Max: 14 * ms, Count: 1000}
	lines := sm.spikeLines()
	require.Len(t, lines, maxSpikes+1)
	assert.True(t, strings.HasPrefix(lines[0], "at 2.75s-3s into the capture: lateness max 14ms"), lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "at 2.25s-2.5s into the capture: lateness max 12ms"), lines[1])
	assert.Equal(t, "1 more spike, smaller: see the charts", lines[maxSpikes])
	var texts []string
	for _, f := range sm.findings() {
		texts = append(texts, f.Text)
	}
	assert.Contains(t, texts, "6 of 12 intervals of the capture had a spike, tick lag or lateness over 2ms; "+
		"the worst, at 2.75s-3s into the capture, points to waiting for a CPU")
	d := sm.diagnosis()
	assert.Equal(t, "spike "+lines[0], d[len(d)-len(lines)])
	assert.Equal(t, lines[maxSpikes], d[len(d)-1], "the count of those left out is no spike line")
}
