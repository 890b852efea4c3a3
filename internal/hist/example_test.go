package hist_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
)

func Example() {
	var lateness hist.Histogram // zero value is ready; owned by one writer

	// The writer (a shard worker) records 1µs, 2µs, ..., 1ms.
	for i := 1; i <= 1000; i++ {
		lateness.Record(int64(time.Duration(i) * time.Microsecond))
	}

	// Any goroutine may take a snapshot.
	s := lateness.Snapshot()
	fmt.Println("count:", s.Count(), "mean:", s.Mean())
	fmt.Println("p50:", time.Duration(s.Quantile(0.5)), "p99:", time.Duration(s.Quantile(0.99)))

	out, _ := json.Marshal(s.Percentiles())
	fmt.Println(string(out))
	// Output:
	// count: 1000 mean: 500.5µs
	// p50: 503.807µs p99: 991.231µs
	// {"p50_ns":503807,"p90_ns":892927,"p99_ns":991231,"p999_ns":991231,"max_ns":1000000,"mean_ns":500500,"count":1000}
}
