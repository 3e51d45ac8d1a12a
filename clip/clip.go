// Package clip shortens text for messages, previews and reject details.
package clip

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Runes returns s cut to at most n characters, the last of them "…" when s
// was longer (n is at least 1).
func Runes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n, 1)-1]) + "…"
}

// Bytes returns s cut to at most n bytes at a character boundary, with "…"
// appended when s was longer.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// List joins items with "; ", the first n of them, then "and N more" for
// the rest.
func List(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}
