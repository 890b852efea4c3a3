package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The other side of proxy: a backend and a load generator, in a process of
// their own (this command, re-executed with proxyLoadCmd), so that the
// proxy's process measures the proxy alone. The two talk over the child's
// standard streams, one line each:
//
//	child  -> parent   backend <url>
//	parent -> child    proxy <url>
//	child  -> parent   start          (warm-up over: the window opens)
//	child  -> parent   stop           (the window closes)
//	child  -> parent   <loadReport as JSON>

// proxyLoadCmd is the hidden command that runs the child.
const proxyLoadCmd = "proxy-load"

// loadReport is what the load generator saw in the measured window.
type loadReport struct {
	OK       int64 `json:"ok"`
	Timeouts int64 `json:"timeouts"` // 504 responses
	Errors   int64 `json:"errors"`   // any other outcome
	// Latency holds each OK request's latency in ns, in no order.
	Latency []int64 `json:"latency_ns"`
}

// runProxyLoad is the child: it serves the backend, waits for the proxy's
// address, drives the load through it and reports. It returns an exit code.
func runProxyLoad(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var p proxyConfig
	fs := flag.NewFlagSet(proxyLoadCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	p.flags(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if err := p.loadRun(ctx, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", proxyLoadCmd, err)
		return exitError
	}
	return exitOK
}

// body is the backend's response: a small API answer.
var body = []byte(strings.Repeat("x", 512))

// backend answers /fast after 1-50ms and /slow after SlowFor, or when the
// proxy gives up on the request.
func (p *proxyConfig) backend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := time.Millisecond + rand.N(49*time.Millisecond)
		if r.URL.Path == "/slow" {
			d = p.SlowFor
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			_, _ = w.Write(body)
		case <-r.Context().Done():
		}
	})
}

func (p *proxyConfig) loadRun(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: p.backend(), ErrorLog: discardLog}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(stdout, "backend http://%s\n", ln.Addr())

	line, err := bufio.NewReader(stdin).ReadString('\n')
	proxyURL, ok := strings.CutPrefix(strings.TrimSpace(line), "proxy ")
	if err != nil || !ok {
		return fmt.Errorf("expected the proxy's address, got %q (%v)", line, err)
	}

	tr := &http.Transport{MaxIdleConnsPerHost: p.Clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var measuring atomic.Bool
	reports := make([]loadReport, p.Clients)
	var wg sync.WaitGroup
	for i := range reports {
		wg.Go(func() { p.client(ctx, client, proxyURL, uint64(i), &measuring, &reports[i]) })
	}
	sleep(ctx, p.Warmup)
	measuring.Store(true)
	fmt.Fprintln(stdout, "start")
	sleep(ctx, p.Duration)
	measuring.Store(false)
	fmt.Fprintln(stdout, "stop")
	stop()
	wg.Wait()
	var total loadReport
	for _, r := range reports {
		total.OK += r.OK
		total.Timeouts += r.Timeouts
		total.Errors += r.Errors
		total.Latency = append(total.Latency, r.Latency...)
	}
	return json.NewEncoder(stdout).Encode(total)
}

// client sends requests one after another on a keep-alive connection
// until ctx is done, counting those that complete while measuring.
func (p *proxyConfig) client(ctx context.Context, c *http.Client, proxyURL string, id uint64, measuring *atomic.Bool, rep *loadReport) {
	r := rand.New(rand.NewPCG(p.Seed, id))
	for ctx.Err() == nil {
		path := "/fast"
		if r.Float64() < p.Slow {
			path = "/slow"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxyURL+path, nil)
		if err != nil {
			rep.Errors++
			return
		}
		start := time.Now()
		resp, err := c.Do(req)
		status := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		took := time.Since(start)
		if !measuring.Load() {
			continue
		}
		switch {
		case status == http.StatusOK:
			rep.OK++
			rep.Latency = append(rep.Latency, int64(took))
		case status == http.StatusGatewayTimeout:
			rep.Timeouts++
		case ctx.Err() == nil:
			rep.Errors++
		}
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
