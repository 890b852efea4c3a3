package shardwheel_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Comment lines are at most commentColumns wide, a tab counting
// tabColumns: a paragraph patched without rewrapping leaves lines that run
// past it.
const commentColumns, tabColumns = 100, 4

// wideCommentFiles are files with wider comment lines, and why: each must
// still have one (else it leaves this list), and none may gain any
// elsewhere.
var wideCommentFiles = map[string]string{
	"otel/doc.go":       "the instrument table: a preformatted row cannot wrap",
	"prometheus/doc.go": "the metric table: a preformatted row cannot wrap",
}

// TestCommentLinesFit: no line of a Go file of the repository (nested
// modules and testdata included) that is a // comment is wider than
// commentColumns, but lines of an example's expected output, which must
// match it to the letter.
func TestCommentLinesFit(t *testing.T) {
	wide := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		lines, err := wideCommentLines(path)
		if len(lines) > 0 {
			wide[filepath.ToSlash(path)] = lines
		}
		return err
	})
	require.NoError(t, err)
	for _, path := range slices.Sorted(maps.Keys(wide)) {
		if _, ok := wideCommentFiles[path]; !ok {
			t.Errorf("%s: comment lines wider than %d columns (a tab is %d): rewrap them\n%s",
				path, commentColumns, tabColumns, strings.Join(wide[path], "\n"))
		}
	}
	for path, why := range wideCommentFiles {
		assert.NotEmpty(t, wide[path], "%s has no comment line wider than %d columns now: take it off wideCommentFiles (%s)", path, commentColumns, why)
	}
}

// wideCommentLines returns, as "line: text", the // comment lines of the
// file at path wider than commentColumns, leaving out those that follow an
// "Output:" line in the same run of comment lines.
func wideCommentLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	output := false // in the expected output of an example
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		text, isComment := strings.CutPrefix(strings.TrimLeft(line, " \t"), "//")
		if !isComment {
			output = false
			continue
		}
		if t := strings.TrimSpace(text); t == "Output:" || t == "Unordered output:" || strings.HasPrefix(t, "Output: ") {
			output = true
		}
		if w := columns(line); w > commentColumns && !output {
			out = append(out, fmt.Sprintf("%5d (%d columns): %s", n, w, line))
		}
	}
	return out, sc.Err()
}

// columns returns how wide line is: a column per character, tabColumns
// for a tab.
func columns(line string) int {
	return utf8.RuneCountInString(line) + (tabColumns-1)*strings.Count(line, "\t")
}
