package units_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/internal/units"
)

// TestNumbers covers Sig, SI and Rate in one table, as they share a rule.
func TestNumbers(t *testing.T) {
	sig, si, rate := units.Sig, units.SI, units.Rate
	for i, c := range []struct {
		f    func(float64) string
		v    float64
		want string
	}{
		{sig, 0, "0"},
		{sig, 5, "5"}, // trailing zeros dropped
		{sig, 1.5, "1.5"},
		{sig, 1.234, "1.23"},
		{sig, 9.994, "9.99"},
		{sig, 9.996, "10"}, // rounds into two integer digits: one decimal fewer
		{sig, 42.5, "42.5"},
		{sig, 99.96, "100"},
		{sig, 999, "999"},
		{sig, 999.7, "1000"}, // no unit to move to: Sig keeps the digits
		{sig, 1200, "1200"},
		{sig, 0.0123, "0.01"}, // at most two decimals
		{sig, 0.004, "0"},
		{sig, -0.001, "0"}, // no "-0"
		{sig, -22, "-22"},
		{sig, -1.5, "-1.5"},

		{si, 0, "0"},
		{si, 22, "22"}, // a count reads as a count, not 22.0
		{si, 999, "999"},
		{si, 999.7, "1k"}, // rounds up into the next unit, not "1000"
		{si, 1234, "1.23k"},
		{si, 1500, "1.5k"},
		{si, 300_000, "300k"},
		{si, 999_999, "1M"},
		{si, 1_234_567, "1.23M"},
		{si, 2e9, "2G"},
		{si, 3e12, "3000G"}, // the largest unit keeps all its digits
		{si, -1500, "-1.5k"},

		{rate, 0, "0/s"},
		{rate, 0.5, "0.5/s"},
		{rate, 850, "850/s"},
		{rate, 12_500, "12.5k/s"},
		{rate, 999_999, "1M/s"},
		{rate, 2_500_000, "2.5M/s"},
	} {
		assert.Equal(t, c.want, c.f(c.v), "case %d: %v", i, c.v)
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{1, "1ns"},
		{450, "450ns"},
		{850, "850ns"},
		{999, "999ns"},
		{1000, "1µs"},
		{1500, "1.5µs"},
		{12345, "12.3µs"},
		{150 * time.Microsecond, "150µs"},
		{614 * time.Microsecond, "614µs"},
		{999_700, "1ms"}, // rounds up into the next unit, not "1000µs"
		{time.Millisecond, "1ms"},
		{1_050_000, "1.05ms"},
		{1_500_000, "1.5ms"},
		{12345 * time.Microsecond, "12.3ms"},
		{2 * time.Second, "2s"},
		{2500 * time.Millisecond, "2.5s"},
		{20 * time.Minute, "1200s"},
		{-1500 * time.Microsecond, "-1.5ms"},
	} {
		assert.Equal(t, c.want, units.Duration(c.d), "%d", int64(c.d))
	}
}

func TestUnitOf(t *testing.T) {
	for _, c := range []struct {
		of    func(float64) (string, float64)
		v     float64
		name  string
		scale float64
	}{
		{units.DurationUnit, 0, "ns", 1},
		{units.DurationUnit, 999, "ns", 1},
		{units.DurationUnit, 1000, "µs", 1e3},
		{units.DurationUnit, 2.5e6, "ms", 1e6},
		{units.DurationUnit, 3600e9, "s", 1e9},
		{units.SIUnit, 0, "", 1},
		{units.SIUnit, 999, "", 1},
		{units.SIUnit, 1000, "k", 1e3},
		{units.SIUnit, 5e6, "M", 1e6},
		{units.SIUnit, 7e9, "G", 1e9},
	} {
		name, scale := c.of(c.v)
		assert.Equal(t, c.name, name, "%v", c.v)
		assert.Equal(t, c.scale, scale, "%v", c.v)
	}
}
