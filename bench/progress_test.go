package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPlanScalesWhatIsLeft: a plan's first estimate is the phases' own;
// once phases have taken twice as long as expected, what is left is
// twice as long too, and a phase faster than expected shortens it.
func TestPlanScalesWhatIsLeft(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	p := &progress{w: &out}
	pl := newPlan(p, "cmd", []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second})
	pl.now = func() time.Time { return now }
	pl.began = now
	pl.start("one")
	now = now.Add(20 * time.Second) // the first phase took twice its 10s
	pl.start("two")
	now = now.Add(20 * time.Second)
	pl.start("three")
	now = now.Add(5 * time.Second) // a fast one: 45s for 30s expected
	pl.start("four")
	assert.Equal(t, "cmd: 4 phases, about 40s in all\n"+
		"phase 1 of 4 (about 40s left): one\n"+
		"phase 2 of 4 (about 1m0s left): two\n"+
		"phase 3 of 4 (about 40s left): three\n"+
		"phase 4 of 4 (about 15s left): four\n", out.String())
}
