package profiling_test

import (
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// newScheduler starts a scheduler that the test stops when it ends.
func newScheduler(t testing.TB, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

// requireWellFormed fails unless doc is well-formed XML.
func requireWellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, "not well-formed:\n%.2000s", doc)
	}
}

var svgBlock = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// requireDrawable checks an HTML or SVG document for what breaks a plot:
// a malformed <svg> block, or a NaN or infinite number. It returns the
// number of <svg> blocks.
func requireDrawable(t *testing.T, doc string) int {
	t.Helper()
	require.NotContains(t, doc, "NaN")
	require.NotContains(t, doc, "Inf")
	blocks := svgBlock.FindAllString(doc, -1)
	for _, b := range blocks {
		requireWellFormed(t, b)
	}
	return len(blocks)
}
