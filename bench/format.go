package main

import (
	"fmt"
	"math"
	"time"
)

// si formats v with three significant digits and a k, M or G suffix.
func si(v float64) string {
	abs := math.Abs(v)
	switch {
	case abs >= 1e9:
		return sig(v/1e9) + "G"
	case abs >= 1e6:
		return sig(v/1e6) + "M"
	case abs >= 1e3:
		return sig(v/1e3) + "k"
	}
	return sig(v)
}

// sig formats v with three significant digits, without exponent.
func sig(v float64) string {
	abs := math.Abs(v)
	switch {
	case abs >= 100 || v == 0:
		return fmt.Sprintf("%.0f", v)
	case abs >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// dur formats d with three significant digits in its natural unit.
func dur(d time.Duration) string {
	abs := d.Abs()
	switch {
	case d == 0:
		return "0"
	case abs < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case abs < time.Millisecond:
		return sig(float64(d)/1e3) + "µs"
	case abs < time.Second:
		return sig(float64(d)/1e6) + "ms"
	}
	return sig(d.Seconds()) + "s"
}
