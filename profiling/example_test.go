package profiling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
	"github.com/shardwheel/shardwheel/stats"
)

// A proxy mounts the handler on its admin mux, under a prefix.
func ExampleHandler() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	for key := range uint64(3) {
		if _, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(key)); err != nil {
			panic(err)
		}
	}

	admin := http.NewServeMux()
	admin.Handle("/timers/", http.StripPrefix("/timers", profiling.Handler(s)))

	rec := httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/timers/stats?window=30s", nil))
	// /stats holds the window and the totals, both shaped as Stats.
	var st struct {
		RequestedWindow time.Duration `json:"requested_window_ns"`
		SinceStart      stats.Stats   `json:"since_start"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), st.RequestedWindow)
	fmt.Println("pending:", st.SinceStart.Pending, "scheduled:", st.SinceStart.Total.Scheduled, "shards:", len(st.SinceStart.Shards))

	rec = httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/timers/stats?window=1h", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 application/json 30s
	// pending: 3 scheduled: 3 shards: 2
	// 400 profiling: window=1h is out of range: want from 1s to 5m
}

// HandlerWith mounts a metrics handler at /metrics beside the page, which
// links to it; profiling itself depends on no metrics library. With
// Prometheus, pass promhttp.Handler() and register a collector of the
// scheduler's Stats.
func ExampleHandlerWith() {
	s, err := shardwheel.New(shardwheel.WithShards(1))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "shardwheel_pending %d\n", s.Pending())
	})
	h := profiling.HandlerWith(s, profiling.Options{Metrics: metrics})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	fmt.Print(rec.Body.String())
	// Output:
	// shardwheel_pending 0
}

// Serve runs the handler on its own loopback listener until the context
// ends. Pass "" to listen on DefaultAddr; port 0 picks a free port.
func ExampleServe() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	srv, err := profiling.Serve(ctx, s, "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/stats")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)

	cancel()
	fmt.Println("stopped:", srv.Wait())
	// Output:
	// 200 OK
	// stopped: <nil>
}
