package shardwheel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/shardwheel/shardwheel"
)

// A proxy arms a timeout per request and cancels it when the response
// arrives. Cancel reports whether it won: false means the timeout already
// fired and the request was failed. A request timeout needs no key: the
// timer lives on the caller's shard, the cheapest place there is.
func ExampleScheduler_AfterFunc() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	const requestID = 1234
	timeout, err := s.AfterFunc(30*time.Second, func() {
		fmt.Println("request", requestID, "timed out")
	})
	if err != nil {
		panic(err) // ErrStopped or ErrTooManyPending: shed the request
	}

	// ... the response arrives in time ...
	if timeout.Cancel() {
		fmt.Println("response delivered, timeout cancelled")
	}
	fmt.Println("pending:", s.Pending())
	// Output:
	// response delivered, timeout cancelled
	// pending: 0
}

// An idle-connection timeout is pushed forward on every read. Moving a
// deadline later is one compare-and-swap; the timer fires only once the
// connection has been idle for the whole delay.
func ExampleTimer_Reset() {
	s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	closed := make(chan time.Time, 1)
	lastRead := time.Now() // taken before (re)arming: the timer fires 20ms after it at the earliest
	idle, err := s.AfterFunc(20*time.Millisecond, func() { closed <- time.Now() })
	if err != nil {
		panic(err)
	}
	for range 5 { // five reads, 5ms apart
		time.Sleep(5 * time.Millisecond)
		read := time.Now()
		if !idle.Reset(20 * time.Millisecond) {
			break // already idle long enough: the connection is closing
		}
		lastRead = read
	}
	at := <-closed
	fmt.Println("closed after 20ms without a read:", at.Sub(lastRead) >= 20*time.Millisecond)
	// Output:
	// closed after 20ms without a read: true
}

// Stop returns the timers that never ran, so that their work can be handed
// elsewhere or reported: Task gives back what each would have run. They
// will never run, and their handles report not pending.
func ExampleScheduler_Stop() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	for id := range uint64(3) {
		if _, err := s.AfterFunc(time.Hour, func() { fmt.Println("retrying request", id) }, shardwheel.ByKey(id)); err != nil {
			panic(err)
		}
	}
	unprocessed := s.Stop()
	fmt.Println("unprocessed:", len(unprocessed), "pending:", unprocessed[0].Pending())
	for _, t := range unprocessed {
		if t.Key() == 1 {
			t.Task()() // hand the work elsewhere: here, run it now
		}
	}

	_, err = s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(4))
	fmt.Println(err)
	// Output:
	// unprocessed: 3 pending: false
	// retrying request 1
	// shardwheel: scheduler stopped
}

// A reverse proxy gives each request a deadline: s.WithTimeout in place of
// context.WithTimeout is the whole change. The deadline reaches the backend
// request, and errors.Is(err, context.DeadlineExceeded) tells a timeout
// from other failures.
func ExampleScheduler_WithTimeout() {
	s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done() // far slower than the proxy waits
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer backend.Close()
	target, _ := url.Parse(backend.URL)

	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.WithTimeout(r.Context(), 500*time.Millisecond)
		defer cancel() // also when ReverseProxy panics with http.ErrAbortHandler
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
	front := httptest.NewServer(handler)
	defer front.Close()

	for _, path := range []string{"/fast", "/slow"} {
		resp, err := http.Get(front.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(path, resp.Status)
	}
	// Output:
	// /fast 200 OK
	// /slow 504 Gateway Timeout
}

// Stats is a snapshot for a monitoring loop: totals, and the same figures
// per shard.
func ExampleScheduler_Stats() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	for i := range uint64(10) {
		if _, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(i)); err != nil {
			panic(err)
		}
	}
	st := s.Stats()
	fmt.Println("pending:", st.Pending, "scheduled:", st.Total.Scheduled, "shards:", len(st.Shards))
	// Output:
	// pending: 10 scheduled: 10 shards: 2
}

// A multiplexed client (HTTP/2 streams, RPC sequence numbers) learns of a
// response by its request id alone. With an Index the scheduler keeps the
// id → timeout index, so the client needs no map of its own: Cancel
// reports whether the response beat the timeout.
func ExampleIndex_Cancel() {
	s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	ix := shardwheel.NewIndex[uint64](s)

	timedOut := make(chan uint64, 1)
	send := func(id uint64, timeout time.Duration) {
		if _, err := ix.AfterFunc(id, timeout, func() { timedOut <- id }); err != nil {
			panic(err) // ErrStopped or ErrTooManyPending: fail the request
		}
	}
	send(1, time.Minute)
	send(2, time.Millisecond) // its response never comes
	send(3, time.Minute)

	// Responses arrive, carrying only their stream id.
	for _, id := range []uint64{3, 1} {
		fmt.Println("response", id, "in time:", ix.Cancel(id))
	}
	fmt.Println("request", <-timedOut, "timed out")
	fmt.Println("late response 2 in time:", ix.Cancel(2))
	_, pending := ix.Lookup(1)
	fmt.Println("request 1 still pending:", pending)
	// Output:
	// response 3 in time: true
	// response 1 in time: true
	// request 2 timed out
	// late response 2 in time: false
	// request 1 still pending: false
}
