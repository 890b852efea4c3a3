//go:build !linux

package main

import "time"

// hostCPUTime returns 0: only Linux exposes the host's CPU time cheaply,
// and the report then says nothing about other processes.
func hostCPUTime() time.Duration { return 0 }
