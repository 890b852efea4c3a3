package shardwheelprom_test

import (
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	shardwheelprom "github.com/shardwheel/shardwheel/prometheus"
	"github.com/shardwheel/shardwheel/stats"
)

// waitFor bounds every condition a test polls for: generous for the race
// detector on a loaded 2-core machine, and only reached on failure.
const waitFor, pollEvery = 10 * time.Second, time.Millisecond

// keysFor returns n keys that route to shard i of s.
func keysFor(s *shardwheel.Scheduler, i, n int) []uint64 {
	var keys []uint64
	for k := uint64(0); len(keys) < n; k++ {
		if s.ShardOf(k) == i {
			keys = append(keys, k)
		}
	}
	return keys
}

// newScenario returns a two-shard Scheduler in a known state. Shard 0:
// four timers an hour away, one cancelled, one reset, and two immediate
// tasks, one of which panics. Shard 1: three timers an hour away, two
// cancelled, and one immediate task. It returns once Stats shows the
// three tasks run; pending is then 4 (3 on shard 0, 1 on shard 1). The
// test stops the Scheduler itself when it wants Stopped counted.
func newScenario(t *testing.T, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	// One P while the scenario schedules: every timer without a series
	// is filed on shard 0, the shard of P 0, whatever its key (its task
	// runs on its key's shard), so that each shard's counts are known.
	// The series (Every) are filed on their key's shard.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	opts = append([]shardwheel.Option{shardwheel.WithShards(2), shardwheel.WithPanicHandler(func(any) {})}, opts...)
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	hour := func(shard, n int) []shardwheel.Timer {
		var tms []shardwheel.Timer
		for _, k := range keysFor(s, shard, n) {
			tm, err := s.Every(time.Hour, func() {}, shardwheel.ByKey(k), shardwheel.OnMissed(shardwheel.SkipMissed))
			require.NoError(t, err)
			tms = append(tms, tm)
		}
		return tms
	}
	now := func(key uint64, task func()) {
		_, err := s.AfterFunc(0, task, shardwheel.ByKey(key))
		require.NoError(t, err)
	}
	zero := hour(0, 4)
	require.True(t, zero[0].Cancel())
	require.True(t, zero[1].Reset(2*time.Hour))
	one := hour(1, 3)
	require.True(t, one[0].Cancel())
	require.True(t, one[1].Cancel())
	now(keysFor(s, 0, 1)[0], func() {})
	now(keysFor(s, 0, 1)[0], func() { panic("boom") })
	now(keysFor(s, 1, 1)[0], func() {})
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return st.Fired == 3 && st.Panics == 1
	}, waitFor, pollEvery)
	require.Equal(t, 4, s.Pending())
	return s
}

// TestCollectAndCompare checks the exposition of the counters and gauges
// whose values the scenario decides, and of an (empty) histogram, before
// and after Stop.
func TestCollectAndCompare(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	c := shardwheelprom.NewCollector(s, shardwheelprom.WithBuckets(0.001, 0.01))
	counters := `
# HELP shardwheel_timers_scheduled_total Timers accepted by AfterFunc and its kin.
# TYPE shardwheel_timers_scheduled_total counter
shardwheel_timers_scheduled_total{shard="0"} 7
shardwheel_timers_scheduled_total{shard="1"} 3
# HELP shardwheel_timers_fired_total Timers fired: their tasks handed to the shard's runner.
# TYPE shardwheel_timers_fired_total counter
shardwheel_timers_fired_total{shard="0"} 3
shardwheel_timers_fired_total{shard="1"} 0
# HELP shardwheel_timers_cancelled_total Cancel calls that returned true, an Index's Cancel and the timers its calls replaced included.
# TYPE shardwheel_timers_cancelled_total counter
shardwheel_timers_cancelled_total{shard="0"} 1
shardwheel_timers_cancelled_total{shard="1"} 2
# HELP shardwheel_timer_resets_total Successful Reset calls.
# TYPE shardwheel_timer_resets_total counter
shardwheel_timer_resets_total{shard="0"} 1
shardwheel_timer_resets_total{shard="1"} 0
# HELP shardwheel_task_panics_total Tasks that panicked or called runtime.Goexit.
# TYPE shardwheel_task_panics_total counter
shardwheel_task_panics_total{shard="0"} 1
shardwheel_task_panics_total{shard="1"} 0
# HELP shardwheel_task_lateness_seconds How late tasks started versus their deadline rounded up to the tick grid.
# TYPE shardwheel_task_lateness_seconds histogram
shardwheel_task_lateness_seconds_bucket{shard="0",le="0.001"} 0
shardwheel_task_lateness_seconds_bucket{shard="0",le="0.01"} 0
shardwheel_task_lateness_seconds_bucket{shard="0",le="+Inf"} 0
shardwheel_task_lateness_seconds_sum{shard="0"} 0
shardwheel_task_lateness_seconds_count{shard="0"} 0
shardwheel_task_lateness_seconds_bucket{shard="1",le="0.001"} 0
shardwheel_task_lateness_seconds_bucket{shard="1",le="0.01"} 0
shardwheel_task_lateness_seconds_bucket{shard="1",le="+Inf"} 0
shardwheel_task_lateness_seconds_sum{shard="1"} 0
shardwheel_task_lateness_seconds_count{shard="1"} 0
`
	names := []string{
		"shardwheel_pending_timers", "shardwheel_timers_scheduled_total", "shardwheel_timers_fired_total",
		"shardwheel_timers_cancelled_total", "shardwheel_timer_resets_total", "shardwheel_timers_stopped_total",
		"shardwheel_task_panics_total", "shardwheel_task_lateness_seconds",
	}
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(counters+`
# HELP shardwheel_pending_timers Timers scheduled and not yet fired, cancelled or stopped (Scheduler.Pending).
# TYPE shardwheel_pending_timers gauge
shardwheel_pending_timers 4
# HELP shardwheel_timers_stopped_total Timers claimed by Stop, which never ran.
# TYPE shardwheel_timers_stopped_total counter
shardwheel_timers_stopped_total{shard="0"} 0
shardwheel_timers_stopped_total{shard="1"} 0
`), names...))

	require.Len(t, s.Stop(), 4)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(counters+`
# HELP shardwheel_pending_timers Timers scheduled and not yet fired, cancelled or stopped (Scheduler.Pending).
# TYPE shardwheel_pending_timers gauge
shardwheel_pending_timers 0
# HELP shardwheel_timers_stopped_total Timers claimed by Stop, which never ran.
# TYPE shardwheel_timers_stopped_total counter
shardwheel_timers_stopped_total{shard="0"} 3
shardwheel_timers_stopped_total{shard="1"} 1
`), names...))
}

// TestNamespaceAndConstLabels: two Schedulers of one process register
// side by side when const labels tell them apart, and not without.
func TestNamespaceAndConstLabels(t *testing.T) {
	a, b := newScenario(t, shardwheel.WithStats(false)), newScenario(t, shardwheel.WithStats(false))
	reg := prometheus.NewPedanticRegistry()
	opt := shardwheelprom.WithNamespace("app")
	require.NoError(t, reg.Register(shardwheelprom.NewCollector(a, opt, shardwheelprom.WithConstLabels(prometheus.Labels{"scheduler": "a"}))))
	require.NoError(t, reg.Register(shardwheelprom.NewCollector(b, opt, shardwheelprom.WithConstLabels(prometheus.Labels{"scheduler": "b"}))))
	require.Error(t, reg.Register(shardwheelprom.NewCollector(b, opt)), "same names without the labels")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP app_shardwheel_pending_timers Timers scheduled and not yet fired, cancelled or stopped (Scheduler.Pending).
# TYPE app_shardwheel_pending_timers gauge
app_shardwheel_pending_timers{scheduler="a"} 4
app_shardwheel_pending_timers{scheduler="b"} 4
`), "app_shardwheel_pending_timers"))
}

// TestInvalidOptionsFailRegistration: a bad namespace or label name is
// reported by Register, as for any collector. (client_golang accepts any
// UTF-8 name, so dashes and leading digits are valid.)
func TestInvalidOptionsFailRegistration(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	for name, opt := range map[string]shardwheelprom.Option{
		"namespace":       shardwheelprom.WithNamespace("\xff"),
		"label name":      shardwheelprom.WithConstLabels(prometheus.Labels{"\xff": "v"}),
		"shard is ours":   shardwheelprom.WithConstLabels(prometheus.Labels{"shard": "v"}),
		"reserved prefix": shardwheelprom.WithConstLabels(prometheus.Labels{"__x": "v"}),
	} {
		assert.Error(t, prometheus.NewRegistry().Register(shardwheelprom.NewCollector(s, opt)), name)
	}
}

// TestNewCollectorPanicsOnProgrammingErrors: a Scheduler not made by New
// and invalid bounds panic at construction, not in a scrape.
func TestNewCollectorPanicsOnProgrammingErrors(t *testing.T) {
	assert.PanicsWithValue(t, "shardwheelprom: NewCollector needs a Scheduler made by shardwheel.New", func() { shardwheelprom.NewCollector(nil) })
	assert.PanicsWithValue(t, "shardwheelprom: NewCollector needs a Scheduler made by shardwheel.New", func() { shardwheelprom.NewCollector(&shardwheel.Scheduler{}) })
	s := newScenario(t, shardwheel.WithStats(false))
	for _, bounds := range [][]float64{{0}, {-1}, {math.NaN()}, {math.Inf(1)}, {1, 1}, {2, 1}} {
		assert.Panics(t, func() { shardwheelprom.NewCollector(s, shardwheelprom.WithBuckets(bounds...)) }, "%v", bounds)
	}
	assert.NotPanics(t, func() { shardwheelprom.NewCollector(s, shardwheelprom.WithBuckets()) })

	assert.PanicsWithValue(t, "shardwheelprom: TickBuckets: tick must be positive, got 0s", func() { shardwheelprom.TickBuckets(0) })

	// Bounds are copied: changing DecadeBuckets later changes nothing.
	c := shardwheelprom.NewCollector(s, shardwheelprom.WithBuckets(shardwheelprom.DecadeBuckets...))
	saved := shardwheelprom.DecadeBuckets[0]
	shardwheelprom.DecadeBuckets[0] = 99
	defer func() { shardwheelprom.DecadeBuckets[0] = saved }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			assert.Equal(t, saved, mf.GetMetric()[0].GetHistogram().GetBucket()[0].GetUpperBound(), mf.GetName())
		}
	}
}

// TestLint runs client_golang's metric linter over a scrape with every
// distribution populated.
func TestLint(t *testing.T) {
	s := newScenario(t)
	problems, err := testutil.CollectAndLint(shardwheelprom.NewCollector(s))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// gather registers a Collector of s in a pedantic registry (which checks
// the metrics against their descriptors) and gathers it once.
func gather(t *testing.T, s *shardwheel.Scheduler, opts ...shardwheelprom.Option) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(shardwheelprom.NewCollector(s, opts...)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}

// shardOf returns the value of m's shard label, or -1 without one.
func shardOf(t *testing.T, m *dto.Metric) int {
	for _, l := range m.GetLabel() {
		if l.GetName() == "shard" {
			i, err := strconv.Atoi(l.GetValue())
			require.NoError(t, err)
			return i
		}
	}
	return -1
}

// TestGatherMatchesStats checks every metric of the tables in a gathered
// scrape of a stopped Scheduler (whose Stats no longer move): its type,
// unit, help, labels, and value against Stats.
func TestGatherMatchesStats(t *testing.T) {
	s := newScenario(t)
	s.Stop()
	st := s.Stats()
	mfs := gather(t, s)
	assert.Len(t, mfs, len(metrics.Shard)+len(metrics.Scheduler), "one family per table entry")

	for _, m := range metrics.Scheduler {
		mf := mfs["shardwheel_"+m.Prom]
		require.NotNil(t, mf, m.Prom)
		assert.Equal(t, dto.MetricType_GAUGE, mf.GetType(), m.Prom)
		require.Len(t, mf.GetMetric(), 1)
		assert.Empty(t, mf.GetMetric()[0].GetLabel(), "no shard label on %s", m.Prom)
		assert.EqualValues(t, m.Int(st), mf.GetMetric()[0].GetGauge().GetValue(), m.Prom)
	}
	for _, m := range metrics.Shard {
		name := "shardwheel_" + m.Prom
		mf := mfs[name]
		require.NotNil(t, mf, name)
		assert.Equal(t, m.Help, mf.GetHelp(), name)
		wantType := map[metrics.Kind]dto.MetricType{
			metrics.Counter: dto.MetricType_COUNTER, metrics.Level: dto.MetricType_GAUGE,
			metrics.Gauge: dto.MetricType_GAUGE, metrics.Distribution: dto.MetricType_HISTOGRAM,
		}[m.Kind]
		assert.Equal(t, wantType, mf.GetType(), name)
		if m.Unit == "s" {
			assert.Equal(t, "seconds", mf.GetUnit(), name)
		} else {
			assert.Empty(t, mf.GetUnit(), name)
		}
		require.Len(t, mf.GetMetric(), 2, "one series per shard: %s", name)
		for i, series := range mf.GetMetric() {
			require.Equal(t, i, shardOf(t, series), name)
			require.Len(t, series.GetLabel(), 1, name)
			sh := st.Shards[i]
			switch {
			case m.Hist != nil:
				h := m.Hist(sh)
				assert.Equal(t, h.Count(), series.GetHistogram().GetSampleCount(), name)
				assert.Equal(t, h.Sum().Seconds(), series.GetHistogram().GetSampleSum(), name)
			case m.Seconds != nil:
				assert.Equal(t, m.Seconds(sh).Seconds(), series.GetGauge().GetValue(), name)
			case m.Kind == metrics.Counter:
				assert.EqualValues(t, m.Int(sh), series.GetCounter().GetValue(), name)
			default:
				assert.EqualValues(t, m.Int(sh), series.GetGauge().GetValue(), name)
			}
		}
	}
}

// TestHistogramsAddUp checks each histogram of a busy, then stopped,
// Scheduler against its Stats: the classic buckets cumulate our buckets
// by their upper bound and end at Count, the native buckets (decoded from
// their spans and deltas) hold each of our buckets at the exponential
// bucket of its upper bound and add up to Count, and _sum is Sum in
// seconds.
func TestHistogramsAddUp(t *testing.T) {
	s := newScenario(t, shardwheel.WithTick(time.Millisecond))
	for k := range uint64(200) {
		_, err := s.AfterFunc(time.Duration(k%7)*time.Millisecond, func() {}, shardwheel.ByKey(k))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 203 }, waitFor, pollEvery)
	s.Stop()
	st := s.Stats()
	mfs := gather(t, s)
	for _, m := range metrics.Shard {
		if m.Hist == nil {
			continue
		}
		for i, series := range mfs["shardwheel_"+m.Prom].GetMetric() {
			h := m.Hist(st.Shards[i])
			got := series.GetHistogram()
			what := m.Prom + " shard " + strconv.Itoa(i)
			assert.Equal(t, h.Count(), got.GetSampleCount(), what)
			assert.Equal(t, h.Sum().Seconds(), got.GetSampleSum(), what)

			// Classic: each bound's count is our buckets with High <= it.
			bounds := shardwheelprom.TickBuckets(time.Millisecond)
			require.Len(t, got.GetBucket(), len(bounds), what)
			for j, b := range got.GetBucket() {
				require.Equal(t, bounds[j], b.GetUpperBound(), what)
				var want uint64
				for ours := range h.Buckets() {
					if float64(ours.High)/1e9 <= b.GetUpperBound() {
						want += ours.Count
					}
				}
				assert.Equal(t, want, b.GetCumulativeCount(), "%s le=%g", what, b.GetUpperBound())
			}

			// Native: decode spans and deltas to index -> count.
			require.EqualValues(t, metrics.NativeScale, got.GetSchema(), what)
			assert.Zero(t, got.GetZeroThreshold(), what)
			native := map[int]uint64{}
			idx, count := 0, int64(0)
			d := got.GetPositiveDelta()
			for _, span := range got.GetPositiveSpan() {
				idx += int(span.GetOffset())
				for range span.GetLength() {
					count += d[0]
					d = d[1:]
					if count != 0 {
						native[idx] = uint64(count)
					}
					idx++
				}
			}
			assert.Empty(t, d, "%s: deltas left over", what)
			want := map[int]uint64{}
			var zeros uint64
			for ours := range h.Buckets() {
				if ours.High == 0 {
					zeros += ours.Count
					continue
				}
				// The smallest i with High <= 2^(i/32) seconds.
				i := int(math.Floor(math.Log2(float64(ours.High)/1e9) * 32))
				for math.Exp2(float64(i)/32) < float64(ours.High)/1e9 {
					i++
				}
				want[i] += ours.Count
			}
			assert.Equal(t, want, native, what)
			assert.Equal(t, zeros, got.GetZeroCount(), what)
			total := got.GetZeroCount()
			for _, n := range native {
				total += n
			}
			assert.Equal(t, h.Count(), total, "%s: native buckets add up to Count", what)
			if m.Field == "PassTime" {
				assert.NotZero(t, h.Count(), "passes ran: %s", what)
			}
		}
	}
}

// TestCollectTakesOneSnapshot checks that a scrape calls Stats once.
func TestCollectTakesOneSnapshot(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	calls := 0
	c := shardwheelprom.NewCollectorForTest(s, func() stats.Stats { calls++; return s.Stats() })
	assert.Equal(t, 1+2*len(metrics.Shard), testutil.CollectAndCount(c))
	assert.Equal(t, 1, calls)
}

// tableRow is a row of the package comment's metric table.
var tableRow = regexp.MustCompile(`(?m)^//\t(\S+)(?: \((?:Stats|its length)\))?\s+(shardwheel_\S+)\s+(counter|gauge|histogram)\s*(\S*)$`)

// TestDocTable keeps the package comment's table true: one row per
// metric, with the name, type and unit a scrape shows.
func TestDocTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	rows := map[string][]string{}
	for _, r := range tableRow.FindAllStringSubmatch(string(doc), -1) {
		rows[r[2]] = r
	}
	s := newScenario(t, shardwheel.WithStats(false))
	mfs := gather(t, s)
	assert.Len(t, rows, len(mfs))
	for name, mf := range mfs {
		r := rows[name]
		if !assert.NotNil(t, r, "no row for %s", name) {
			continue
		}
		assert.Equal(t, strings.ToLower(mf.GetType().String()), r[3], name)
		assert.Equal(t, mf.GetUnit(), r[4], name)
	}
	for _, m := range metrics.Shard {
		assert.Equal(t, m.Field, rows["shardwheel_"+m.Prom][1], m.Prom)
	}
}
