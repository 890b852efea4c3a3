package shardwheel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docPackages maps the package prefixes TESTING.md writes before a test
// name (shard.TestX) to their directories; a name without one is the root
// package's.
var docPackages = map[string]string{
	"":           ".",
	"shard":      "shard",
	"ring":       "ring",
	"pool":       "pool",
	"hist":       "internal/hist",
	"metrics":    "internal/metrics",
	"hostcpu":    "internal/hostcpu",
	"units":      "internal/units",
	"watchdog":   "internal/watchdog",
	"profiling":  "profiling",
	"bench":      "bench",
	"prometheus": "prometheus",
	"otel":       "otel",
	"sdk":        "otel/sdk",
}

// docTestName matches a test, benchmark, example or fuzz target named in
// TESTING.md, with its package prefix if any; a caret before it marks a
// name in a go test command ('^TestX$'), whose package the command's path
// gives.
var docTestName = regexp.MustCompile(`(\^)?\b(?:([a-z]+)\.)?((?:Test|Benchmark|Example|Fuzz)[A-Z0-9_][A-Za-z0-9_]*)`)

// TestTestingDocNamesExist keeps TESTING.md true to the code: every test,
// benchmark, example and fuzz target it names is declared in the
// *_test.go files of the package it names (the root package when it names
// none; any package for a name in a go test command), and every fuzz
// target of the repository is named, so that the fuzzing it documents
// leaves none out.
func TestTestingDocNamesExist(t *testing.T) {
	doc, err := os.ReadFile("TESTING.md")
	require.NoError(t, err)
	declared := declaredTestFuncs(t, ".")
	cited := map[string]map[string]bool{} // directory -> names cited there
	cite := func(dir, name string) {
		if cited[dir] == nil {
			cited[dir] = map[string]bool{}
		}
		cited[dir][name] = true
	}
	names := 0
	for _, m := range docTestName.FindAllStringSubmatch(string(doc), -1) {
		inCommand, prefix, name := m[1] != "", m[2], m[3]
		names++
		if inCommand && prefix == "" {
			found := false
			for dir, funcs := range declared {
				if funcs[name] {
					cite(dir, name)
					found = true
				}
			}
			if !found {
				t.Errorf("TESTING.md runs %s, which no package declares", name)
			}
			continue
		}
		dir, ok := docPackages[prefix]
		if !ok {
			t.Errorf("TESTING.md names %s.%s: no package %q (see docPackages)", prefix, name, prefix)
			continue
		}
		if !declared[dir][name] {
			t.Errorf("TESTING.md names %s, which %s/*_test.go does not declare", strings.TrimPrefix(m[0], "^"), dir)
		}
		cite(dir, name)
	}
	require.Positive(t, names, "TESTING.md names no test")
	for dir, funcs := range declared {
		for name := range funcs {
			if strings.HasPrefix(name, "Fuzz") && !cited[dir][name] {
				t.Errorf("TESTING.md does not name the fuzz target %s in %s", name, dir)
			}
		}
	}
}

// declaredTestFuncs returns, per directory under root (slash-separated,
// "." for root), the top-level functions of its *_test.go files whose
// names start with Test, Benchmark, Example or Fuzz, whatever their build
// tags.
func declaredTestFuncs(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			for _, p := range []string{"Test", "Benchmark", "Example", "Fuzz"} {
				if strings.HasPrefix(fn.Name.Name, p) {
					if out[dir] == nil {
						out[dir] = map[string]bool{}
					}
					out[dir][fn.Name.Name] = true
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
