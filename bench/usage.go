package main

import (
	"fmt"
	"io"
	"slices"
)

// usage writes the help text: the commands, then cmd's flags (compare's
// for "help").
func usage(w io.Writer, cmd string) {
	fmt.Fprint(w, `usage: go run ./bench [command] [flags]

Commands:
  compare  shardwheel against time.AfterFunc under a proxy-shaped load, then the churn load (the default; about 3 minutes)
  churn    the delayed-cancel churn alone: schedule a 30s timer, cancel the one from 65,536 iterations earlier;
           time.AfterFunc, s.AfterFunc and s.AfterFunc(ByKey), one fresh process per run, in rounds
  tune     sweep shard counts and ticks; recommend the cheapest that meets -lag-p99
  lag      profile shardwheel under the proxy-shaped load (fgprof + HTML report in -out)
  proxy    a net/http reverse proxy on loopback, its request deadlines from context.WithTimeout vs s.WithTimeout
  burst    a million timers at once: how late each runs, shardwheel against time.AfterFunc
  spike    a spike of 1M and 10M timers, all cancelled: how far and how fast the heap and a forced GC come back,
           s.AfterFunc, h.AfterFunc and time.AfterFunc, one fresh process per run (-churn=false: idle; about 2m30s)
  rate     a timer's CPU by the rate they are set (100 to 1M/s, cancelled 20ms later), against context.WithTimeout
           and time.AfterFunc, with the shards' wake-ups per second (about 2 minutes)

Every command prints a text report on stdout (progress on stderr), or with -json one JSON document
of the same shape for all: command, host, started, elapsed_ns, config, results, verdict, interrupted.

`)
	if cmd == "help" {
		cmd = commands[0]
	}
	o := options{cmd: cmd}
	fs := newFlagSet(&o)
	fs.SetOutput(w)
	fmt.Fprintf(w, "Flags of %s:\n", cmd)
	fs.PrintDefaults()
}

// usageHint says where to read about a bad command line of cmd: its
// usage, or the list of commands when cmd is not one.
func usageHint(cmd string) string {
	if !slices.Contains(commands, cmd) {
		return "run 'go run ./bench -h' for the list"
	}
	return fmt.Sprintf("run 'go run ./bench %s -h' for usage", cmd)
}
