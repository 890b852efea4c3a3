//go:build !linux

package shardwheel

// pinner returns no pin function: CPU affinity is a documented no-op outside
// Linux, so WithAffinity(true) changes nothing there.
func pinner(int) (pin func() error, onErr func(error)) { return nil, nil }
