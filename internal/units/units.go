// Package units formats measurements for people, by one rule shared by
// the bench command and the profiling reports:
//
//   - a value is shown in the largest unit that keeps it at least 1
//     (850ns, 12.3µs, 1.05ms; 950, 1.2k, 3.4M);
//   - it is rounded to three significant digits, but to no more than two
//     decimals (0.0123 shows as 0.01), and numbers of 1000 or more in the
//     largest unit keep all their integer digits (1200s);
//   - trailing zeros after the point are dropped (1.50 shows as 1.5), so
//     that a count reads as a count (22, not 22.0);
//   - a value that rounds up to 1000 moves to the next unit (999.7µs shows
//     as 1ms, not 1000µs).
//
// time.Duration.String would print all nine digits of a measured latency,
// and %g switches to exponents.
package units

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// unit is a name and how many base units it holds.
type unit struct {
	name  string
	scale float64
}

var (
	durUnits = []unit{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}
	siUnits  = []unit{{"", 1}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}}
)

// Sig formats v with three significant digits, at most two decimals and
// no trailing zeros: 0 → "0", 5 → "5", 42.53 → "42.5", 999.7 → "1000".
func Sig(v float64) string {
	prec := 0
	switch a := math.Abs(v); {
	case a < 9.995:
		prec = 2
	case a < 99.95:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if prec > 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// SI formats v by Sig with a k, M or G suffix: 1234 → "1.23k".
func SI(v float64) string { return scaled(v, siUnits) }

// Rate formats a per-second rate as SI does, with "/s": 12500 → "12.5k/s".
func Rate(r float64) string { return SI(r) + "/s" }

// Duration formats d by Sig in ns, µs, ms or s: 1_050_000 → "1.05ms".
// Zero is "0", without a unit.
func Duration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return scaled(float64(d), durUnits)
}

// DurationUnit returns the largest unit that keeps d nanoseconds at
// least 1, and its size in nanoseconds: the unit of a chart axis whose
// top is d.
func DurationUnit(d float64) (name string, scale float64) {
	u := durUnits[index(d, durUnits)]
	return u.name, u.scale
}

// SIUnit returns the largest suffix that keeps v at least 1 ("" below
// 1000), and its size.
func SIUnit(v float64) (name string, scale float64) {
	u := siUnits[index(v, siUnits)]
	return u.name, u.scale
}

// scaled formats v in the largest of units that keeps it at least 1,
// moving to the next unit when it rounds up to 1000.
func scaled(v float64, units []unit) string {
	i := index(v, units)
	s := Sig(v / units[i].scale)
	if strings.TrimPrefix(s, "-") == "1000" && i+1 < len(units) {
		i++
		s = Sig(v / units[i].scale)
	}
	return s + units[i].name
}

// index returns the position of the largest of units that keeps v at
// least 1, or 0.
func index(v float64, units []unit) int {
	a, i := math.Abs(v), 0
	for i+1 < len(units) && a >= units[i+1].scale {
		i++
	}
	return i
}
