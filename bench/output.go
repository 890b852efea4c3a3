package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// document is a command's result: JSON-encodable, and able to write
// itself as text.
type document interface {
	writeText(w io.Writer) error
}

// resultPaths are the files o's command writes its document to when -out
// is set: <cmd>.txt and <cmd>.json in it.
func resultPaths(o options) (text, js string) {
	return filepath.Join(o.out, o.cmd+".txt"), filepath.Join(o.out, o.cmd+".json")
}

// prepareOut creates -out and, empty, the result files in it, so that a
// path that cannot be written fails before the load runs rather than
// after it. lag's capture writes into the same directory.
func prepareOut(o options) error {
	if o.out == "" {
		return nil
	}
	text, js := resultPaths(o)
	err := os.MkdirAll(o.out, 0o755)
	for _, p := range []string{text, js} {
		if err == nil {
			err = os.WriteFile(p, nil, 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("cannot write results: %w", err)
	}
	return nil
}

// emit writes doc to stdout, as JSON with -json and as text otherwise,
// and both forms to resultPaths when -out is set, telling stderr where.
func emit(o options, doc document, stdout, stderr io.Writer) error {
	var text, js bytes.Buffer
	if err := doc.writeText(&text); err != nil {
		return err
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	out := text.Bytes()
	if o.json {
		out = js.Bytes()
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	textPath, jsPath := resultPaths(o)
	for _, f := range []struct {
		path string
		b    []byte
	}{{textPath, text.Bytes()}, {jsPath, js.Bytes()}} {
		if err := os.WriteFile(f.path, f.b, 0o644); err != nil {
			return fmt.Errorf("writing results: %w", err)
		}
	}
	_, err := fmt.Fprintf(stderr, "results written to %s and %s\n", textPath, jsPath)
	return err
}

// affinityNote is what a header adds after shardwheel's tick when its
// shard goroutines were pinned to CPUs.
func affinityNote(on bool) string {
	if on {
		return ", affinity on"
	}
	return ""
}
