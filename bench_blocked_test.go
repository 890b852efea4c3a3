package shardwheel_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel"
)

// BenchmarkBesideABlockedTask measures what a task that blocks costs the
// other timers: two shards, a task on shard 1 blocked on a channel, then
// 20 goroutines scheduling 10 timers each, due 1ms on, 1ms apart, keyed to
// shard 0 or AfterFunc (filed on whichever wheel their P has), once the
// task has blocked for 20ms. It reports
// how many of the 200 ran within a second (ran/200) and the p99 of how late
// they ran (late-p99-ms, over those that ran), with takeovers on (the
// default) and off (the wheel waits for its task), beside time.AfterFunc in
// the same run:
//
//	go test -run '^$' -bench BesideABlockedTask -benchtime 5x -count 5 . |
//		benchstat -col /takeover -
func BenchmarkBesideABlockedTask(b *testing.B) {
	for _, kind := range []string{"keyed", "AfterFunc", "time.AfterFunc"} {
		for _, takeover := range []string{"on", "off"} {
			if kind == "time.AfterFunc" && takeover == "off" {
				continue
			}
			b.Run("kind="+kind+"/takeover="+takeover, func(b *testing.B) {
				var late []time.Duration
				ran := 0
				for range b.N {
					l := besideABlockedTask(b, kind, takeover == "on")
					ran += len(l)
					late = append(late, l...)
				}
				slices.Sort(late)
				b.ReportMetric(float64(ran)/float64(b.N), "ran/200")
				if len(late) > 0 {
					b.ReportMetric(float64(late[len(late)*99/100])/1e6, "late-p99-ms")
				}
			})
		}
	}
}

// besideABlockedTask runs one round of BenchmarkBesideABlockedTask and
// returns how late each timer that ran within a second ran.
func besideABlockedTask(b *testing.B, kind string, takeover bool) []time.Duration {
	opts := []shardwheel.Option{shardwheel.WithShards(2)}
	if !takeover {
		opts = append(opts, shardwheel.WithBlockedAfter(0))
	}
	s, err := shardwheel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	if _, err := s.Schedule(keysFor(s, 1, 1)[0], 0, func() { close(started); <-release }); err != nil {
		b.Fatal(err)
	}
	<-started
	// The timers come once the task has blocked for 20ms, past the
	// takeover (1-2 ticks by default): those due before it wait for it, as with
	// takeovers off.
	time.Sleep(20 * time.Millisecond)
	healthy := keysFor(s, 0, 200)
	var mu sync.Mutex
	var late []time.Duration
	var left atomic.Int64
	left.Store(200)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 10 {
				due := time.Now().Add(time.Millisecond)
				f := func() {
					d := time.Since(due)
					mu.Lock()
					late = append(late, d)
					mu.Unlock()
					if left.Add(-1) == 0 {
						close(done)
					}
				}
				var err error
				switch kind {
				case "keyed":
					_, err = s.Schedule(healthy[g*10+i], time.Millisecond, f)
				case "AfterFunc":
					_, err = s.AfterFunc(time.Millisecond, f)
				default:
					time.AfterFunc(time.Millisecond, f)
				}
				if err != nil {
					b.Error(err)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	mu.Lock()
	out := slices.Clone(late)
	mu.Unlock()
	close(release)
	s.Stop()
	return out
}

// BenchmarkLatenessBesideASleepyKey measures the lateness of a proxy's
// timeouts while one key's task sleeps 50ms every 100ms: two shards, two
// goroutines scheduling 10k timers a second in all, keyed at random, due
// 5-20ms on; the sleepy key's timer re-schedules itself 100ms on each time
// it runs. Each op is a 2s window; late-p99-ms is the p99 of how late the
// other timers ran (from their deadline), with takeovers on and off:
//
//	go test -run '^$' -bench LatenessBesideASleepyKey -benchtime 1x -count 5 . |
//		benchstat -col /takeover -
func BenchmarkLatenessBesideASleepyKey(b *testing.B) {
	for _, takeover := range []string{"on", "off"} {
		b.Run("takeover="+takeover, func(b *testing.B) {
			var late []time.Duration
			for range b.N {
				late = append(late, besideASleepyKey(b, takeover == "on", 2*time.Second)...)
			}
			slices.Sort(late)
			if len(late) > 0 {
				b.ReportMetric(float64(late[len(late)*99/100])/1e6, "late-p99-ms")
				b.ReportMetric(float64(late[len(late)/2])/1e6, "late-p50-ms")
			}
		})
	}
}

// besideASleepyKey runs one window of BenchmarkLatenessBesideASleepyKey
// and returns how late each other timer ran.
func besideASleepyKey(b *testing.B, takeover bool, window time.Duration) []time.Duration {
	opts := []shardwheel.Option{shardwheel.WithShards(2)}
	if !takeover {
		opts = append(opts, shardwheel.WithBlockedAfter(0))
	}
	s, err := shardwheel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	const sleepyKey = 1 << 40
	var sleepy func()
	sleepy = func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := s.Schedule(sleepyKey, 50*time.Millisecond, sleepy); err != nil && err != shardwheel.ErrStopped {
			b.Error(err)
		}
	}
	if _, err := s.Schedule(sleepyKey, 50*time.Millisecond, sleepy); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var late []time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for g := range 2 {
		wg.Go(func() {
			const perSecond = 5000
			start := time.Now()
			for i := 0; time.Now().Before(end); i++ {
				if ahead := time.Duration(i)*time.Second/perSecond - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
				d := time.Duration(5+(i*7+g)%16) * time.Millisecond
				due := time.Now().Add(d)
				_, err := s.Schedule(uint64(i*2+g), d, func() {
					l := time.Since(due)
					mu.Lock()
					late = append(late, l)
					mu.Unlock()
				})
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the last timers run
	mu.Lock()
	out := slices.Clone(late)
	mu.Unlock()
	s.Stop()
	return out
}
