//go:build !linux

package shardwheel

import "log/slog"

// pinner returns no pin function: CPU affinity is a documented no-op outside
// Linux, so WithAffinity(true) changes nothing there.
func pinner(int, func() *slog.Logger) (pin func() error, onErr func(error)) { return nil, nil }
