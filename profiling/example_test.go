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
)

// A proxy mounts the handler on its admin mux, under a prefix.
func ExampleHandler() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	for key := range uint64(3) {
		if _, err := s.Schedule(key, time.Hour, func() {}); err != nil {
			panic(err)
		}
	}

	admin := http.NewServeMux()
	admin.Handle("/timers/", http.StripPrefix("/timers", profiling.Handler(s)))

	rec := httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/timers/stats", nil))
	var st shardwheel.Stats
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println("pending:", st.Pending, "scheduled:", st.Total.Scheduled, "shards:", len(st.Shards))
	// Output:
	// 200 application/json
	// pending: 3 scheduled: 3 shards: 2
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
