package main

import (
	"io"
	"strings"
	"unicode/utf8"
)

// table lays out rows of cells in aligned columns: the first column
// left-aligned, the others right-aligned as numbers read best, unless
// align says otherwise ('l' or 'r' per column). A row of one cell is a
// heading and does not affect the widths.
type table struct {
	rows  [][]string
	align string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write writes the table to w.
func (t *table) write(w io.Writer) error {
	var width []int
	for _, r := range t.rows {
		if len(r) < 2 {
			continue
		}
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			pad := 0
			if len(r) > 1 {
				pad = width[i] - utf8.RuneCountInString(c)
			}
			if i > 0 {
				line.WriteString("  ")
			}
			if t.left(i) {
				line.WriteString(c + strings.Repeat(" ", pad))
			} else {
				line.WriteString(strings.Repeat(" ", pad) + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *table) left(col int) bool {
	if col < len(t.align) {
		return t.align[col] == 'l'
	}
	return col == 0
}
