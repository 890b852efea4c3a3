package shardwheel_test

import (
	"bytes"
	"runtime/trace"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestPassesInTheTrace captures an execution trace while timers run and
// finds the shards' passes in it. The trace's own parser is internal to
// the Go tree (and golang.org/x/exp/trace is not among this module's
// dependencies), so the test checks the bytes: a trace holds each string
// it names once, in its string table, so the region type and the log
// categories and messages appear verbatim when, and only when, a pass was
// traced. go tool trace shows them as regions of the shard goroutines,
// with their logs.
func TestPassesInTheTrace(t *testing.T) {
	var buf bytes.Buffer
	require.Equal(t, "shardwheel.pass", shardwheel.TraceRegionPass, "the name README and go tool trace show")
	require.NoError(t, trace.Start(&buf))
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		trace.Stop()
		t.Fatal(err)
	}
	done := make(chan struct{})
	for i := range 50 {
		_, err = s.AfterFunc(time.Duration(i%5)*time.Millisecond, func() {}, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	}
	_, err = s.AfterFunc(6*time.Millisecond, func() { close(done) }, shardwheel.ByKey(99))
	require.NoError(t, err)
	<-done
	s.Stop()
	trace.Stop()
	b := buf.Bytes()
	for _, want := range []string{shardwheel.TraceRegionPass, "shardwheel.shard", "shardwheel.work", "taken_in=", "cascaded="} {
		require.True(t, bytes.Contains(b, []byte(want)), "%q not in the trace (%d bytes)", want, len(b))
	}
}
