package shardwheel

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFreedPlansAreBounded: the stack of ended plans' states, which the
// garbage collector cannot empty, keeps at most maxFreedPlans of a spike
// of them; taking from it moves the rest to the pool, emptying it.
func TestFreedPlansAreBounded(t *testing.T) {
	for range 2 * maxFreedPlans {
		newPlanState().freed()
	}
	n := 0
	for st := freedPlans.Load(); st != nil; st = st.nextFree {
		n++
	}
	assert.LessOrEqual(t, n, maxFreedPlans)
	assert.EqualValues(t, n, freedCount.Load())
	st := takeFreedPlans()
	assert.NotNil(t, st)
	assert.NotNil(t, st.runTask, "a state's methods stay bound")
	assert.Nil(t, st.nextFree)
	assert.Nil(t, freedPlans.Load())
	assert.Zero(t, freedCount.Load())
}
