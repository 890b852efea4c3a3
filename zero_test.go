package shardwheel_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel"
)

// errZero is the panic of a Scheduler's methods on a Scheduler New did not
// make.
const errZero = "shardwheel: use New to create a Scheduler"

// TestZeroSchedulerSaysUseNew: a Scheduler not made by New is misuse, and
// the panic says so instead of an index out of range.
func TestZeroSchedulerSaysUseNew(t *testing.T) {
	var s shardwheel.Scheduler
	tests := map[string]func(){
		"AfterFunc":          func() { _, _ = s.AfterFunc(time.Second, noop) },
		"AfterFunc, ByKey":   func() { _, _ = s.AfterFunc(time.Second, noop, shardwheel.ByKey(1)) },
		"Every":              func() { _, _ = s.Every(time.Second, noop) },
		"ShardOf":            func() { s.ShardOf(1) },
		"MaxDelay":           func() { s.MaxDelay() },
		"Stop":               func() { s.Stop() },
		"Shutdown":           func() { _, _ = s.Shutdown(context.Background()) },
		"WithTimeout":        func() { s.WithTimeout(context.Background(), time.Second) },
		"WithDeadline, past": func() { s.WithDeadline(context.Background(), time.Now().Add(-time.Second)) },
		"WithTimeoutCause":   func() { s.WithTimeoutCause(context.Background(), time.Second, nil) },
		"WithDeadlineCause":  func() { s.WithDeadlineCause(context.Background(), time.Now(), nil) },
	}
	for name, call := range tests {
		assert.PanicsWithValue(t, errZero, call, name)
	}
	// Read-only accessors report an empty scheduler.
	assert.Zero(t, s.Shards())
	assert.Zero(t, s.Pending())
	assert.Empty(t, s.Stats().Shards)
}

// readOnly are the methods that report an empty scheduler on a zero
// Scheduler instead of panicking.
var readOnly = map[string]bool{"Shards": true, "Tick": true, "Pending": true, "Stats": true}

// TestEveryMethodOfANilOrZeroSchedulerSaysUseNew calls every method of
// *Scheduler, found by reflection so that a new one cannot be left out,
// with a non-nil argument of each kind (a nil task is ErrNilTask whatever
// the Scheduler): on a nil *Scheduler each panics with the zero
// Scheduler's message, never a bare nil dereference; on a zero Scheduler
// each panics with it too, but the read-only accessors, which report an
// empty scheduler.
func TestEveryMethodOfANilOrZeroSchedulerSaysUseNew(t *testing.T) {
	typ := reflect.TypeFor[*shardwheel.Scheduler]()
	require := assert.New(t)
	require.Positive(typ.NumMethod())
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		args := make([]reflect.Value, m.Type.NumIn()-1)
		for j := range args {
			args[j] = argOf(m.Type.In(j + 1))
		}
		if m.Type.IsVariadic() {
			args = args[:len(args)-1] // no options
		}
		for _, recv := range []struct {
			name string
			s    *shardwheel.Scheduler
		}{{"nil", nil}, {"zero", new(shardwheel.Scheduler)}} {
			call := func() { reflect.ValueOf(recv.s).Method(i).Call(args) }
			what := fmt.Sprintf("%s on a %s *Scheduler", m.Name, recv.name)
			if recv.s != nil && readOnly[m.Name] {
				assert.NotPanics(t, call, what)
				continue
			}
			assert.PanicsWithValue(t, errZero, call, what)
		}
	}
}

// argOf returns a valid argument of type t: a function that does nothing,
// a live context, or t's zero value.
func argOf(t reflect.Type) reflect.Value {
	switch {
	case t.Kind() == reflect.Func:
		return reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, t.NumOut())
			for i := range out {
				out[i] = reflect.Zero(t.Out(i))
			}
			return out
		})
	case t == reflect.TypeFor[context.Context]():
		return reflect.ValueOf(context.Background())
	case t == reflect.TypeFor[time.Duration]():
		return reflect.ValueOf(time.Second)
	case t == reflect.TypeFor[time.Time]():
		return reflect.ValueOf(time.Now().Add(time.Second))
	}
	return reflect.Zero(t)
}
