package shardwheelprom_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardwheel/shardwheel"
	shardwheelprom "github.com/shardwheel/shardwheel/prometheus"
)

// A Collector registers like any other; serve the registry with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}). This lists what a
// scrape holds, with each family's type.
func ExampleNewCollector() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(shardwheelprom.NewCollector(s))

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		fmt.Printf("%s %s series=%d\n", mf.GetName(), mf.GetType(), len(mf.GetMetric()))
	}
	// Output:
	// shardwheel_blocked_refused_total COUNTER series=2
	// shardwheel_blocked_runs_total COUNTER series=2
	// shardwheel_blocked_tasks GAUGE series=2
	// shardwheel_blocks_released_total COUNTER series=2
	// shardwheel_blocks_remade_total COUNTER series=2
	// shardwheel_held_cancelled_timers GAUGE series=2
	// shardwheel_longest_blocked_task_seconds GAUGE series=2
	// shardwheel_nodes_allocated GAUGE series=2
	// shardwheel_nodes_released_total COUNTER series=2
	// shardwheel_pass_duration_seconds HISTOGRAM series=2
	// shardwheel_pending_timers GAUGE series=1
	// shardwheel_periodic_missed_total COUNTER series=2
	// shardwheel_periodic_runs_total COUNTER series=2
	// shardwheel_queued_peak_timers GAUGE series=2
	// shardwheel_queued_timers GAUGE series=2
	// shardwheel_recent_queued_peak_timers GAUGE series=2
	// shardwheel_recent_refiled_peak_timers GAUGE series=2
	// shardwheel_recent_slowest_pass_cascaded_timers GAUGE series=2
	// shardwheel_recent_slowest_pass_fired_timers GAUGE series=2
	// shardwheel_recent_slowest_pass_refiled_timers GAUGE series=2
	// shardwheel_recent_slowest_pass_seconds GAUGE series=2
	// shardwheel_recent_slowest_pass_transferred_timers GAUGE series=2
	// shardwheel_recent_transfer_peak_timers GAUGE series=2
	// shardwheel_refiled_peak_timers GAUGE series=2
	// shardwheel_resident_timers GAUGE series=2
	// shardwheel_slowest_pass_cascaded_timers GAUGE series=2
	// shardwheel_slowest_pass_fired_timers GAUGE series=2
	// shardwheel_slowest_pass_refiled_timers GAUGE series=2
	// shardwheel_slowest_pass_seconds GAUGE series=2
	// shardwheel_slowest_pass_transferred_timers GAUGE series=2
	// shardwheel_sweeps_total COUNTER series=2
	// shardwheel_swept_timers_total COUNTER series=2
	// shardwheel_task_duration_seconds HISTOGRAM series=2
	// shardwheel_task_lateness_seconds HISTOGRAM series=2
	// shardwheel_task_panics_total COUNTER series=2
	// shardwheel_tick_lag_seconds HISTOGRAM series=2
	// shardwheel_tick_passes_total COUNTER series=2
	// shardwheel_ticks_skipped_total COUNTER series=2
	// shardwheel_timer_resets_total COUNTER series=2
	// shardwheel_timers_cancelled_total COUNTER series=2
	// shardwheel_timers_crossed_total COUNTER series=2
	// shardwheel_timers_fired_total COUNTER series=2
	// shardwheel_timers_refiled_total COUNTER series=2
	// shardwheel_timers_scheduled_total COUNTER series=2
	// shardwheel_timers_stopped_total COUNTER series=2
	// shardwheel_timers_taken_back_total COUNTER series=2
	// shardwheel_transfer_cap_hits_total COUNTER series=2
	// shardwheel_transfer_last_timers GAUGE series=2
	// shardwheel_transfer_peak_timers GAUGE series=2
	// shardwheel_wakeups_total COUNTER series=2
}
