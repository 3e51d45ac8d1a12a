package stages

import (
	"strings"
	"sync"
)

// A textMemo remembers a value made from a text, per text, up to budget
// bytes of texts and values; a text met once the budget is spent is made
// every time. It keeps its own copy of each text, never a record's memory.
// Safe for concurrent use; a nil *textMemo remembers nothing.
type textMemo[V any] struct {
	budget int
	mu     sync.Mutex
	m      map[string]V
	used   int
}

// get returns the value of text: remembered, else mk's (which also
// gives the value's size in bytes). The value is shared: not to be changed.
func (tm *textMemo[V]) get(text string, mk func(string) (V, int)) V {
	if tm != nil {
		tm.mu.Lock()
		v, ok := tm.m[text]
		tm.mu.Unlock()
		if ok {
			return v
		}
	}
	v, size := mk(text)
	if tm == nil {
		return v
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if known, ok := tm.m[text]; ok {
		return known
	}
	if size += len(text); tm.used+size <= tm.budget {
		if tm.m == nil {
			tm.m = map[string]V{}
		}
		tm.m[strings.Clone(text)] = v
		tm.used += size
	}
	return v
}
