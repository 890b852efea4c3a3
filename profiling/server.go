package profiling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/shardwheel/shardwheel"
)

// DefaultAddr is the address Serve listens on when given "": loopback only,
// so that the endpoints are reachable from the host (ssh tunnels, kubectl
// port-forward) but not from the network. Port 6061 sits next to 6060, the
// port the net/http/pprof documentation uses, so that both can run.
const DefaultAddr = "127.0.0.1:6061"

// shutdownTimeout bounds how long stopping a Server waits for requests in
// flight. The CPU profile and the trace end early when asked; an fgprof
// profile ignores cancellation and is cut off when this runs out.
const shutdownTimeout = 5 * time.Second

// Server is a running Handler started by Serve or ServeWith. Its methods
// are safe for concurrent use.
type Server struct {
	http   *http.Server
	addr   string
	cancel context.CancelFunc // ends the requests' context and starts the shutdown
	done   chan struct{}      // closed once the server has stopped
	err    error              // why it stopped; written before done is closed
}

// Serve listens on addr and serves Handler(s) in the background until ctx
// is done or Close is called, then shuts down gracefully. It returns once
// the listener is open, or the error that prevented it.
//
// An empty addr means DefaultAddr, on the loopback interface. Any other
// address is used as given: ":6061" or "0.0.0.0:6061" exposes stacks,
// memory and the command line to the network, so only pass one on purpose,
// with something in front that authenticates. A port of 0 picks a free
// port; Server.Addr reports it.
func Serve(ctx context.Context, s *shardwheel.Scheduler, addr string) (*Server, error) {
	if s == nil {
		return nil, errors.New("profiling: Serve: nil Scheduler")
	}
	return serve(ctx, s, addr, Options{})
}

// ServeWith is Serve serving HandlerWith(s, opts): with opts.Metrics, at
// /metrics, for instance.
func ServeWith(ctx context.Context, s *shardwheel.Scheduler, addr string, opts Options) (*Server, error) {
	if s == nil {
		return nil, errors.New("profiling: ServeWith: nil Scheduler")
	}
	return serve(ctx, s, addr, opts)
}

// serve implements Serve and ServeWith.
func serve(ctx context.Context, s *shardwheel.Scheduler, addr string, opts Options) (*Server, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profiling: %w", err)
	}
	// Requests see base end with ctx or Close, which stops long CPU
	// profile and trace requests instead of waiting them out.
	base, cancel := context.WithCancel(ctx)
	srv := &Server{
		http: &http.Server{
			Handler:           newHandler(s, withClock(opts, time.Now)),
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return base },
		},
		addr:   ln.Addr().String(),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go srv.run(ln, base)
	return srv, nil
}

// run serves ln until base is done or serving fails, then shuts down.
func (srv *Server) run(ln net.Listener, base context.Context) {
	served := make(chan error, 1)
	go func() { served <- srv.http.Serve(ln) }()
	var err error
	select {
	case err = <-served: // the listener failed
		srv.cancel()
	case <-base.Done():
		ctx, stop := context.WithTimeout(context.Background(), shutdownTimeout)
		if srv.http.Shutdown(ctx) != nil {
			srv.http.Close() // cut off what outlived the timeout
		}
		stop()
		if e := <-served; !errors.Is(e, http.ErrServerClosed) {
			err = e
		}
	}
	if err != nil {
		err = fmt.Errorf("profiling: serve %s: %w", srv.addr, err)
	}
	srv.err = err
	close(srv.done)
}

// Addr returns the address the server listens on, with the actual port
// when Serve was given port 0.
func (srv *Server) Addr() string { return srv.addr }

// Close stops the server: it closes the listener, cancels the requests in
// flight and waits for them, at most a few seconds, before cutting them
// off. It returns what Wait returns. Closing a stopped server does nothing
// more.
func (srv *Server) Close() error {
	srv.cancel()
	return srv.Wait()
}

// Wait blocks until the server has stopped, after Close or once Serve's ctx
// is done, and returns nil, or the error that stopped it if serving failed.
func (srv *Server) Wait() error {
	<-srv.done
	return srv.err
}
