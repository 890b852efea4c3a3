// Command bench shows what shardwheel does on this host: it runs a
// proxy-shaped timer load against shardwheel and against time.AfterFunc
// and compares them (compare, the default), finds the cheapest shard
// count and tick that meet a tick-lag target (tune), or profiles
// shardwheel under the load (lag). Run it with no arguments first:
//
//	go run ./bench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130 // as a shell reports death by SIGINT
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, callable in-process: it parses args, runs
// the command and returns the exit code. The first SIGINT or SIGTERM
// stops the run early and still reports what was measured; a second one
// kills the process as usual.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run with the interruption coming from ctx.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == proxyLoadCmd {
		return runProxyLoad(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	o, err := parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, o.cmd)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v; %s\n", err, usageHint(o.cmd))
		return exitUsage
	}
	if err := prepareOut(o); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitError
	}
	if o.procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.procs))
	}
	// A run that fails or is interrupted still has a document: what it
	// measured before.
	doc, err := dispatch(ctx, o, newProgress(stderr))
	if werr := emit(o, doc, stdout, stderr); werr != nil && err == nil {
		err = werr
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitError
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "bench: interrupted; the results above are partial")
		return exitInterrupted
	}
	return exitOK
}

// dispatch runs o's command. The document it returns is never nil.
func dispatch(ctx context.Context, o options, p *progress) (document, error) {
	switch o.cmd {
	case "tune":
		return tune(ctx, o, p)
	case "lag":
		return lag(ctx, o, p)
	case "proxy":
		return proxyCompare(ctx, o, p)
	case "burst":
		return burst(ctx, o, p)
	}
	return compare(ctx, o, p)
}
