package formats

import (
	"fmt"
	"strings"
	"testing"
)

// TestTypeMemo: appendType writes for a type it remembers what it wrote
// the first time (what rewriteType gives), each member after a comma once
// members were written; and the memo stays small however long and many
// the types of a dump are.
func TestTypeMemo(t *testing.T) {
	w := workspaces.New().(*workspace)
	types := []string{"str", "int, optional", "List[str]", "Optional[Dict[str, Any]]", "weird thing", "integer",
		"Union[int, float], optional", "Tuple[float, float]", "STR, Optional", ""}
	for i := range 600 {
		types = append(types, fmt.Sprintf("List[%s%d]", strings.Repeat("x", 2000), i), fmt.Sprintf("t%d", i))
	}
	for round := range 2 {
		for _, s := range types {
			want := rewriteType(w, s)
			for _, n0 := range []int{0, 1} {
				n := n0
				b, opt := w.appendType([]byte("{"), &n, s)
				sep := ""
				if n0 > 0 && want.n > 0 {
					sep = ","
				}
				if string(b) != "{"+sep+want.members || opt != want.optional || n != n0+want.n {
					t.Fatalf("round %d, %.40q after %d members: wrote %s (%v, n %d), want {%s%s (%v, n %d)", round, s, n0, b, opt, n, sep, want.members, want.optional, n0+want.n)
				}
			}
		}
	}
	size := 0
	for k, v := range w.types {
		size += len(k) + len(v.members)
	}
	if len(w.types) > maxTypes || size > maxTypes*maxTypeLen*8 {
		t.Fatalf("the memo holds %d types, %d bytes", len(w.types), size)
	}
	if _, ok := w.types["int, optional"]; !ok {
		t.Error("a type met first is not remembered")
	}
}
