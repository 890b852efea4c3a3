//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// termWidth returns the width of the terminal f, or 0 if unknown.
func termWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
