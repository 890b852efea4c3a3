package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	tb := &table{}
	tb.add("", "a", "bb")
	tb.add("group")
	tb.add("  row", "1", "")
	tb.add("  longer row", "123", "x")
	var b bytes.Buffer
	require.NoError(t, tb.write(&b))
	assert.Equal(t, ""+
		"                a  bb\n"+
		"group\n"+
		"  row           1\n"+
		"  longer row  123   x\n", b.String())
}
