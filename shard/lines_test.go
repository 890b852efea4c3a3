package shard

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roleWords are the words by which doc.go's "written by" column names
// each writer role: a row whose group a role wrote must say one of them.
var roleWords = map[uint32][]string{
	roleGoroutine: {"the goroutine"},
	roleHolder:    {"holder"},
	roleOther: {"any goroutine", "producers", "Stop", "Close", "callers", "readers",
		"executors'", "other shards'", "run tasks"},
}

// TestLineWriters holds doc.go's cache-line table to what the code does:
// with the verify tag, every write of a field the table names records the
// role of the goroutine writing (lines.go); a mixed load on two shards
// (plain, routed, indexed and periodic timers, an executor, take-backs,
// earlier and later Resets, CancelWait, Stats readers, Stop) records them
// all, and each role a group was written by must be one its row names.
func TestLineWriters(t *testing.T) {
	if !debug {
		t.Skip("writers are recorded with the shardwheel_verify tag only")
	}
	var unindexed sync.Map
	_, shards := newGroup(t, 2, func(c *Config) {
		c.Run = func(f func()) { go f() }
		c.Unindex = func(key uint64, r Ref) { unindexed.Store(r, key) }
	})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			for i := range 2000 {
				sh := shards[r.IntN(2)]
				now := sh.Now()
				d := time.Duration(r.IntN(5)) * time.Millisecond
				req := Request{Key: r.Uint64(), Now: now, Delay: d, Task: Task{Func: func() {}}}
				switch i % 6 {
				case 1:
					req.Routed = true
				case 2:
					req.Indexed = true
				case 3:
					req.Period, req.Delay = time.Millisecond, 0
				}
				ref, rej := sh.Schedule(&req)
				if !assert.Equal(t, Accepted, rej) {
					return
				}
				switch r.IntN(5) {
				case 0:
					sh.Cancel(ref) // at once: a take-back on the shard's own P
				case 1:
					sh.Reset(ref, req.Key, time.Hour)
					sh.Reset(ref, req.Key, 0) // earlier: the attention queue
				case 2:
					if req.Indexed {
						sh.CancelUnindexed(ref)
					} else {
						sh.Cancel(ref)
					}
				case 3:
					_, err := sh.CancelWait(context.Background(), ref)
					assert.NoError(t, err)
				}
				if i%64 == 0 {
					_ = sh.Stats()
				}
			}
		})
	}
	wg.Wait()
	for _, sh := range shards {
		sh.Close()
		<-sh.Exited()
		sh.Drain(func(Ref, uint64, time.Duration, Task) bool { return true })
	}
	var seen [numLineGroups]uint32
	for _, sh := range shards {
		for g := range seen {
			seen[g] |= sh.lines[g].Load()
		}
	}
	writers := writersColumn(t)
	for g, name := range lineGroupNames {
		col, ok := writers[name]
		require.True(t, ok, "doc.go's table has no row %q", name)
		require.NotZero(t, seen[g], "nobody wrote group %s: the load does not reach it", name)
		for role, words := range roleWords {
			if seen[g]&role == 0 {
				continue
			}
			assert.True(t, containsAny(col, words), "group %s was written by a role its row does not name (%v): %q",
				name, words, col)
		}
	}
}

// writersColumn returns each group's "written by" text in doc.go's table,
// continuation lines joined.
func writersColumn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range lineTable(t) {
		out[r.group] = r.writers
	}
	return out
}

// containsAny reports whether s contains one of words.
func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
