package shardwheel_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// expvarRuns numbers the runs of TestExpvarOneLiner: expvar names live as
// long as the process, so a rerun (go test -count=2) needs a fresh one.
var expvarRuns atomic.Int32

// TestExpvarOneLiner checks the README's expvar one-liner: /debug/vars
// serves the Scheduler's Stats as JSON, with every field of Stats and of
// each shard's stats.Shard, and the histograms as their percentiles.
func TestExpvarOneLiner(t *testing.T) {
	name := "shardwheel"
	if n := expvarRuns.Add(1); n > 1 {
		name = fmt.Sprintf("shardwheel%d", n)
	}
	s := newScheduler(t, shardwheel.WithShards(2))

	expvar.Publish(name, expvar.Func(func() any { return s.Stats() }))

	var tms []shardwheel.Timer
	for k := range uint64(3) {
		tm, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(k))
		require.NoError(t, err)
		tms = append(tms, tm)
	}
	require.True(t, tms[0].Cancel())
	_, err := s.AfterFunc(0, noop, shardwheel.ByKey(7))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := s.Stats().Total // lateness is recorded once the task has run
		return st.Fired == 1 && st.Lateness.Count() == 1
	}, waitFor, pollEvery)

	rec := httptest.NewRecorder()
	expvar.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var vars map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &vars))
	require.Contains(t, vars, name)

	var st struct {
		Pending int                          `json:"pending"`
		Total   map[string]json.RawMessage   `json:"total"`
		Shards  []map[string]json.RawMessage `json:"shards"`
	}
	require.NoError(t, json.Unmarshal(vars[name], &st))
	assert.Equal(t, 2, st.Pending)
	require.Len(t, st.Shards, 2)
	assert.JSONEq(t, "4", string(st.Total["scheduled"]))
	assert.JSONEq(t, "1", string(st.Total["cancelled"]))
	assert.JSONEq(t, "1", string(st.Total["fired"]))

	// Every field of stats.Shard is there, in the total and per shard.
	var fields map[string]json.RawMessage
	b, err := json.Marshal(stats.Shard{})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fields))
	for _, m := range append([]map[string]json.RawMessage{st.Total}, st.Shards...) {
		assert.Equal(t, slices.Sorted(maps.Keys(fields)), slices.Sorted(maps.Keys(m)))
	}
	var lateness map[string]json.Number
	require.NoError(t, json.Unmarshal(st.Total["lateness"], &lateness))
	assert.Equal(t, []string{"count", "max_ns", "mean_ns", "p50_ns", "p90_ns", "p999_ns", "p99_ns"}, slices.Sorted(maps.Keys(lateness)))
	assert.Equal(t, json.Number("1"), lateness["count"])
}
