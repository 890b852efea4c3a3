package shardwheelotel_test

import (
	"context"
	"fmt"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardwheel/shardwheel"
	shardwheelotel "github.com/shardwheel/shardwheel/otel"
	shardwheelsdk "github.com/shardwheel/shardwheel/otel/sdk"
)

// With the SDK: Register reports the counters and gauges, the
// shardwheelsdk Producer the distributions as exponential histograms.
// A ManualReader stands in for a periodic reader and its exporter; this
// lists what one collection holds.
func ExampleRegister() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(shardwheelsdk.NewProducer(s)))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := shardwheelotel.Register(s, provider.Meter(shardwheelotel.ScopeName), shardwheelotel.WithoutSummaries())
	if err != nil {
		panic(err)
	}
	defer reg.Unregister()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			lines = append(lines, fmt.Sprintf("%s %s %s", m.Name, kind(m.Data), m.Unit))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// shardwheel.blocks.released counter {block}
	// shardwheel.blocks.remade counter {block}
	// shardwheel.nodes.allocated updowncounter {node}
	// shardwheel.nodes.released counter {node}
	// shardwheel.pass.duration exponential-histogram s
	// shardwheel.pass.peak_refiled gauge {timer}
	// shardwheel.pass.recent_peak_refiled gauge {timer}
	// shardwheel.pass.recent_slowest.cascaded gauge {timer}
	// shardwheel.pass.recent_slowest.duration gauge s
	// shardwheel.pass.recent_slowest.fired gauge {timer}
	// shardwheel.pass.recent_slowest.refiled gauge {timer}
	// shardwheel.pass.recent_slowest.transferred gauge {timer}
	// shardwheel.pass.slowest.cascaded gauge {timer}
	// shardwheel.pass.slowest.duration gauge s
	// shardwheel.pass.slowest.fired gauge {timer}
	// shardwheel.pass.slowest.refiled gauge {timer}
	// shardwheel.pass.slowest.transferred gauge {timer}
	// shardwheel.periodic.missed counter {point}
	// shardwheel.periodic.runs counter {run}
	// shardwheel.queue.depth updowncounter {timer}
	// shardwheel.queue.peak_depth gauge {timer}
	// shardwheel.queue.recent_peak_depth gauge {timer}
	// shardwheel.sweep.completed counter {sweep}
	// shardwheel.sweep.freed counter {timer}
	// shardwheel.task.blocked updowncounter {task}
	// shardwheel.task.blocked_refused counter {look}
	// shardwheel.task.blocked_runs counter {task}
	// shardwheel.task.duration exponential-histogram s
	// shardwheel.task.lateness exponential-histogram s
	// shardwheel.task.longest_blocked gauge s
	// shardwheel.task.panics counter {panic}
	// shardwheel.tick.lag exponential-histogram s
	// shardwheel.tick.passes counter {pass}
	// shardwheel.tick.skipped counter {tick}
	// shardwheel.timer.cancelled counter {timer}
	// shardwheel.timer.crossed counter {timer}
	// shardwheel.timer.fired counter {timer}
	// shardwheel.timer.held_cancelled updowncounter {timer}
	// shardwheel.timer.pending updowncounter {timer}
	// shardwheel.timer.refiled counter {timer}
	// shardwheel.timer.resets counter {reset}
	// shardwheel.timer.resident updowncounter {timer}
	// shardwheel.timer.scheduled counter {timer}
	// shardwheel.timer.stopped counter {timer}
	// shardwheel.timer.taken_back counter {timer}
	// shardwheel.transfer.cap_hits counter {tick}
	// shardwheel.transfer.last gauge {timer}
	// shardwheel.transfer.peak gauge {timer}
	// shardwheel.transfer.recent_peak gauge {timer}
	// shardwheel.wakeups counter {wakeup}
}

// kind names the instrument behind an aggregation.
func kind(data metricdata.Aggregation) string {
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		if d.IsMonotonic {
			return "counter"
		}
		return "updowncounter"
	case metricdata.Gauge[int64], metricdata.Gauge[float64]:
		return "gauge"
	case metricdata.ExponentialHistogram[float64]:
		return "exponential-histogram"
	}
	return fmt.Sprintf("%T", data)
}
