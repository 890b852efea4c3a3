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

// emit writes doc to stdout, as JSON with -json and as text otherwise,
// and both forms into -out when it is set.
func emit(o options, doc document, stdout io.Writer) error {
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
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{o.cmd + ".txt": text.Bytes(), o.cmd + ".json": js.Bytes()} {
		if err := os.WriteFile(filepath.Join(o.out, name), b, 0o644); err != nil {
			return fmt.Errorf("writing results: %w", err)
		}
	}
	return nil
}
