package formats

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/jsontree"
)

// readsDirect reports whether the row parser took row's tool list and
// answers through xlamLiteral.
func readsDirect(t *testing.T, row []byte) bool {
	t.Helper()
	w := workspaces.New().(*workspace)
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Embedded: xlamEmbedded, Literal: w.literal}
	if _, err := p.Parse(); err != nil {
		return false
	}
	return w.haveTools && w.haveCalls
}

// TestXLAMDirectTaken checks that the direct reader takes the tool lists
// of the fixture and of the shared dumps' rows (the bench harness's), not
// only that it agrees with the tree when it does.
func TestXLAMDirectTaken(t *testing.T) {
	rows := fixtureRows(t, "xlam.json")
	if dir := sharedDataOrEmpty(); dir != "" {
		for _, lang := range []string{"en", "zh"} {
			data, err := os.ReadFile(filepath.Join(dir, "derived", "xlam_format_glaive_toolcall_"+lang+"_demo.json"))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, scanRows(t, data)...)
		}
	}
	n := 0
	for _, row := range rows {
		if readsDirect(t, row) {
			n++
		}
		sameInOnePass(t, string(row))
	}
	t.Logf("%d of %d rows read directly", n, len(rows))
	if n < len(rows)*9/10 {
		t.Errorf("only %d of %d rows read directly", n, len(rows))
	}
}

func sharedDataOrEmpty() string {
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(dir, "FORMATS.md")); err != nil {
		return ""
	}
	return dir
}
