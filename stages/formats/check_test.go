package formats

import (
	"slices"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/shard"
)

// TestParseOutputPassesCheck holds Parse to its contract that every record
// it returns passes shard.Check (the runner writes ingest's records without
// checking them again) where it is hardest: text damaged inside the
// strings. Into every fixture row, at each word start (a letter after a
// space, most often inside a string), it puts bytes that are not UTF-8, a
// UTF-8-encoded surrogate, a lone \u surrogate escape and a NUL escape in
// turn. Most variants still read (the damage repaired to U+FFFD); each
// record read must pass Check. The fuzz targets (checkInvariants) check
// the same on any row.
func TestParseOutputPassesCheck(t *testing.T) {
	damage := []struct {
		name, bytes string
		repair      string // the repair tag a record read from such a row carries, or ""
	}{
		{"invalid_bytes", "\xff\xc3(\x80", "invalid_utf8"},
		{"encoded_surrogate", "\xed\xa0\x80x", "invalid_utf8"},
		{"truncated_rune", "\xe4\xb8", "invalid_utf8"},
		{"lone_surrogate_escape", `\udc80`, "lone_surrogate"},
		{"nul_escape", `\u0000`, ""},
	}
	for _, fx := range fixtures {
		t.Run(fx.format, func(t *testing.T) {
			for _, d := range damage {
				read, repaired := 0, 0
				for i, row := range fixtureRows(t, fx.file) {
					for at := 1; at < len(row); at++ {
						if row[at-1] != ' ' || row[at] < 'a' || row[at] > 'z' {
							continue
						}
						bad := string(row[:at]) + d.bytes + string(row[at:])
						rec, err := Parse(fx.format, "src", int64(i), []byte(bad))
						if err != nil {
							continue
						}
						read++
						if reason, err := shard.Check(rec); err != nil {
							t.Fatalf("%s at byte %d of row %d: the record fails shard.Check (%s): %v", d.name, at, i, reason, err)
						}
						if d.repair != "" && slices.Contains(strings.Split(rec.Tag("repairs"), ","), d.repair) {
							repaired++
						}
					}
				}
				// Not vacuous: the damage must mostly leave rows readable,
				// and repaired where it is repaired.
				if read == 0 || d.repair != "" && repaired == 0 {
					t.Errorf("%s: %d damaged rows read, %d repaired as %s", d.name, read, repaired, d.repair)
				}
			}
		})
	}
}
