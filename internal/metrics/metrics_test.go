package metrics

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

var histogramType = reflect.TypeFor[stats.Histogram]()

// leaves returns the selector paths of t's fields, descending into
// structs other than Histogram (which exporters read as a whole).
func leaves(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		path := prefix + f.Name
		if f.Type.Kind() == reflect.Struct && f.Type != histogramType {
			out = append(out, leaves(f.Type, path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// TestEveryShardFieldIsExported fails when a field is added to
// stats.Shard (or stats.Pass) without a line in Shard or NotExported, and
// when a line names a field that does not exist.
func TestEveryShardFieldIsExported(t *testing.T) {
	described := map[string]int{}
	for _, m := range Shard {
		described[m.Field]++
	}
	fields := leaves(reflect.TypeFor[stats.Shard](), "")
	require.NotEmpty(t, fields)
	for f := range NotExported {
		require.Contains(t, fields, f, "NotExported names a field stats.Shard does not have")
		require.Zero(t, described[f], "%s is both exported and not", f)
		described[f] = 1
	}
	for _, f := range fields {
		assert.Equal(t, 1, described[f], "stats.Shard.%s must be described by exactly one entry of metrics.Shard", f)
		delete(described, f)
	}
	assert.Empty(t, described, "metrics.Shard describes fields stats.Shard does not have")
}

// TestEveryStatsFieldIsExported does the same for Stats: Pending is a
// Scheduler metric, Shards is the Shard table, and Total is left out on
// purpose (see Scheduler).
func TestEveryStatsFieldIsExported(t *testing.T) {
	handled := map[string]bool{"Shards": true, "Total": true}
	for _, m := range Scheduler {
		require.False(t, handled[m.Field], "Stats.%s is described twice", m.Field)
		handled[m.Field] = true
	}
	for f := range reflect.TypeFor[stats.Stats]().Fields() {
		assert.True(t, handled[f.Name], "Stats.%s must be described by metrics.Scheduler", f.Name)
		delete(handled, f.Name)
	}
	assert.Empty(t, handled, "metrics.Scheduler describes fields Stats does not have")
}

// someHistogram returns a non-empty Histogram from a real Scheduler: the
// pass time of the passes that ran a timer.
func someHistogram(t *testing.T) stats.Histogram {
	t.Helper()
	s, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(t, err)
	defer s.Stop()
	_, err = s.AfterFunc(0, func() {}, shardwheel.ByKey(1))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return st.Fired == 1 && st.PassTime.Count() > 0
	}, 10*time.Second, time.Millisecond)
	return s.Stats().Total.PassTime
}

// TestAccessorsReadTheirField fills every leaf of a stats.Shard with a
// distinct value and checks that each Metric reads its own field's: a
// copy-pasted accessor that reads a neighbour fails here.
func TestAccessorsReadTheirField(t *testing.T) {
	h := someHistogram(t)
	var st stats.Shard
	want := map[string]int64{} // field -> the value (for histograms, the count) put there
	v := reflect.ValueOf(&st).Elem()
	for i, path := range leaves(v.Type(), "") {
		f := field(v, path)
		n := int64(i + 1)
		switch {
		case f.Type() == histogramType:
			var merged stats.Histogram
			for range n {
				merged.Merge(h)
			}
			f.Set(reflect.ValueOf(merged))
			n = int64(merged.Count())
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(n * int64(time.Millisecond))
			n *= int64(time.Millisecond)
		case f.Kind() == reflect.Slice: // a list, exported as its length
			f.Set(reflect.MakeSlice(f.Type(), int(n), int(n)))
		case f.CanUint():
			f.SetUint(uint64(n))
		case f.Kind() == reflect.Bool, f.Kind() == reflect.String: // not exported
			continue
		default:
			f.SetInt(n)
		}
		want[path] = n
	}
	for _, m := range Shard {
		var got int64
		switch {
		case m.Int != nil:
			got = m.Int(st)
		case m.Seconds != nil:
			got = int64(m.Seconds(st))
		case m.Hist != nil:
			got = int64(m.Hist(st).Count())
		}
		assert.Equal(t, want[m.Field], got, "%s reads the wrong field", m.Field)
	}
	stats := stats.Stats{Pending: 42}
	for _, m := range Scheduler {
		assert.EqualValues(t, 42, m.Int(stats), m.Field)
	}
}

// field returns the field of v at a selector path.
func field(v reflect.Value, path string) reflect.Value {
	for name := range strings.SplitSeq(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}

var (
	// promName is a Prometheus name by the naming practices: lower snake
	// case (the legacy character set, which every tool accepts).
	promName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	// otelName is an instrument name by the API's syntax, restricted to
	// the semantic conventions' lower-case dotted namespaces.
	otelName = regexp.MustCompile(`^shardwheel(\.[a-z][a-z0-9_]*)+$`)
	// annotation is a UCUM annotation: a count of something.
	annotation = regexp.MustCompile(`^\{[a-z]+\}$`)
)

// TestTableFollowsConventions checks every entry against the naming rules
// the package comment and the exporters rely on, so that a new line that
// breaks one fails here rather than in a scrape.
func TestTableFollowsConventions(t *testing.T) {
	type entry struct {
		field, prom, otel, unit, help string
		kind                          Kind
		accessors                     int
		seconds, hist                 bool
		samples                       string
	}
	var entries []entry
	for _, m := range Shard {
		n := 0
		for _, set := range []bool{m.Int != nil, m.Seconds != nil, m.Hist != nil} {
			if set {
				n++
			}
		}
		entries = append(entries, entry{m.Field, m.Prom, m.OTel, m.Unit, m.Help, m.Kind, n, m.Seconds != nil, m.Hist != nil, m.Samples})
	}
	for _, m := range Scheduler {
		n := 0
		if m.Int != nil {
			n = 1
		}
		entries = append(entries, entry{field: m.Field, prom: m.Prom, otel: m.OTel, unit: m.Unit, help: m.Help, kind: m.Kind, accessors: n})
	}

	promNames := map[string]string{}
	otelNames := map[string]string{}
	for _, e := range entries {
		t.Run(e.field, func(t *testing.T) {
			assert.Equal(t, 1, e.accessors, "exactly one accessor")
			assert.Regexp(t, promName, e.prom)
			assert.Regexp(t, otelName, e.otel)
			assert.NotEmpty(t, e.help)
			assert.True(t, strings.HasSuffix(e.help, "."), "help is a sentence")
			assert.Equal(t, e.kind == Counter, strings.HasSuffix(e.prom, "_total"), "_total iff counter")
			assert.Equal(t, e.unit == "s", strings.HasSuffix(e.prom, "_seconds"), "_seconds iff unit s")
			assert.Equal(t, e.unit == "s", e.seconds || e.hist, "unit s iff a duration")
			if e.unit != "s" {
				assert.Regexp(t, annotation, e.unit)
			}
			assert.Equal(t, e.kind == Distribution, e.hist, "Hist iff Distribution")
			assert.Equal(t, e.kind == Distribution, e.samples != "", "Samples iff Distribution")
			if e.samples != "" {
				assert.Regexp(t, annotation, e.samples)
			}
			if e.seconds {
				assert.Equal(t, Gauge, e.kind, "a duration that is not a distribution is a gauge")
			}
			for _, reserved := range []string{"_bucket", "_count", "_sum"} {
				assert.False(t, strings.HasSuffix(e.prom, reserved), "%s is a histogram's series suffix", reserved)
			}
		})
		require.NotContains(t, promNames, e.prom, "Prometheus name of %s and %s", e.field, promNames[e.prom])
		promNames[e.prom] = e.field
		require.NotContains(t, otelNames, e.otel, "OpenTelemetry name of %s and %s", e.field, otelNames[e.otel])
		otelNames[e.otel] = e.field
	}
	// The semantic conventions keep one hierarchy: no instrument name may
	// also be a namespace of another.
	for a := range otelNames {
		for b := range otelNames {
			assert.False(t, strings.HasPrefix(b, a+"."), "%s is a namespace of %s", a, b)
		}
	}
}
