package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// document is a command's result: able to write itself as text, and to
// fill the JSON envelope every command shares.
type document interface {
	writeText(w io.Writer) error
	envelope() envelope
}

// envelope is the JSON document of every command (see the package
// documentation): the same top-level keys whatever the command, its own
// parts under config, results and verdict.
type envelope struct {
	Command string `json:"command"`
	Host    Host   `json:"host"`
	// Started is when the command started, in RFC 3339 with the local
	// offset; Elapsed is how long it ran, in nanoseconds.
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Config is what the command was asked to do, defaults included.
	Config any `json:"config"`
	// Results are what it measured.
	Results any `json:"results"`
	// Verdict is its conclusion; null for commands that rate nothing.
	Verdict *Verdict `json:"verdict"`
	// Interrupted is set when SIGINT or SIGTERM cut the run short: the
	// results cover what was measured before.
	Interrupted bool `json:"interrupted"`

	// legacy, if set, is a document whose top-level keys the envelope
	// also carries, where they do not clash with its own: lag's former
	// shape, until its tests read the envelope (see LagRun.envelope).
	legacy any
}

// marshal encodes e, indented, with legacy's keys after its own.
func (e envelope) marshal() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil || e.legacy == nil {
		return indent(b, err)
	}
	var own, old map[string]json.RawMessage
	if err := json.Unmarshal(b, &own); err != nil {
		return nil, err
	}
	lb, err := json.Marshal(e.legacy)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(lb, &old); err != nil {
		return nil, err
	}
	// Keep the envelope's order, then the legacy keys it lacks.
	var out bytes.Buffer
	out.WriteString(strings.TrimSuffix(string(b), "}"))
	keys := make([]string, 0, len(old))
	for k := range old {
		if _, clash := own[k]; !clash {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		fmt.Fprintf(&out, ",%s:%s", kb, old[k])
	}
	out.WriteString("}")
	return indent(out.Bytes(), nil)
}

// indent indents a JSON document two spaces a level, with a final
// newline, as json.Encoder with SetIndent writes it.
func indent(b []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
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
// started is when the command started.
func emit(o options, doc document, started time.Time, stdout, stderr io.Writer) error {
	var text, js bytes.Buffer
	if err := doc.writeText(&text); err != nil {
		return err
	}
	env := doc.envelope()
	env.Command, env.Started, env.Elapsed = o.cmd, started, time.Since(started)
	b, err := env.marshal()
	if err != nil {
		return err
	}
	js.Write(b)
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
	_, err = fmt.Fprintf(stderr, "results written to %s and %s\n", textPath, jsPath)
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
