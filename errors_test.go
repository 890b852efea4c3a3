package shardwheel_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// sentinels are the package's exported sentinel errors, by name, each with
// a real call that fails with it (or, for ErrTaskGoexit, reports it).
var sentinels = map[string]struct {
	err  error
	from func(t *testing.T) error
}{
	"ErrStopped": {shardwheel.ErrStopped, func(t *testing.T) error {
		s := newScheduler(t)
		s.Stop()
		_, err := s.AfterFunc(time.Second, noop)
		return err
	}},
	"ErrTooManyPending": {shardwheel.ErrTooManyPending, func(t *testing.T) error {
		s := newScheduler(t, shardwheel.WithMaxPending(1))
		_, err := s.AfterFunc(time.Hour, noop)
		require.NoError(t, err)
		_, err = s.AfterFunc(time.Hour, noop)
		return err
	}},
	"ErrNilTask": {shardwheel.ErrNilTask, func(t *testing.T) error {
		_, err := newScheduler(t).AfterFunc(time.Second, nil, shardwheel.ByKey(1))
		return err
	}},
	"ErrTooManyHandlers": {shardwheel.ErrTooManyHandlers, func(t *testing.T) error {
		s := newScheduler(t)
		for {
			if _, err := s.NewHandler(func(uint64) {}); err != nil {
				return err
			}
		}
	}},
	"ErrBadPeriod": {shardwheel.ErrBadPeriod, func(t *testing.T) error {
		_, err := newScheduler(t).Every(0, noop, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
		return err
	}},
	"ErrTaskGoexit": {shardwheel.ErrTaskGoexit, func(t *testing.T) error {
		reported := make(chan any, 1)
		s := newScheduler(t, shardwheel.WithPanicHandler(func(v any) { reported <- v }))
		_, err := s.AfterFunc(0, runtime.Goexit)
		require.NoError(t, err)
		select {
		case v := <-reported:
			err, _ := v.(error)
			return err
		case <-time.After(waitFor):
			t.Fatal("the Goexit was never reported")
			return nil
		}
	}},
	"ErrInvalidOption": {shardwheel.ErrInvalidOption, func(t *testing.T) error {
		_, err := shardwheel.New(shardwheel.WithShards(0))
		return err
	}},
}

// TestSentinelErrorsAreDistinct: every exported sentinel error of the
// package (every exported var named Err..., found in its source) is
// listed above; their messages are distinct and say shardwheel; errors.Is
// matches each with itself only; and the error a real call fails with
// matches its sentinel and no other.
func TestSentinelErrorsAreDistinct(t *testing.T) {
	assert.ElementsMatch(t, exportedErrVars(t), slices.Collect(maps.Keys(sentinels)),
		"the package's exported Err vars and this test's sentinels differ")
	messages := map[string]string{}
	for name, a := range sentinels {
		require.NotNil(t, a.err, name)
		msg := a.err.Error()
		assert.True(t, strings.HasPrefix(msg, "shardwheel: "), "%s: %q", name, msg)
		if other, dup := messages[msg]; dup {
			t.Errorf("%s and %s share the message %q", name, other, msg)
		}
		messages[msg] = name
		for other, b := range sentinels {
			assert.Equal(t, name == other, errors.Is(a.err, b.err), "errors.Is(%s, %s)", name, other)
		}
	}
	for name, a := range sentinels {
		t.Run(name, func(t *testing.T) {
			err := a.from(t)
			require.Error(t, err)
			for other, b := range sentinels {
				assert.Equal(t, name == other, errors.Is(err, b.err), "errors.Is(%q, %s)", err, other)
			}
		})
	}
}

// exportedErrVars returns the names of the package-level exported vars
// named Err... in the package's (non-test) source files.
func exportedErrVars(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, "Err") && id.IsExported() {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}
