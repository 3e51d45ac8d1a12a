package report

import (
	"slices"
	"strings"
	"testing"
)

func TestHubLicense(t *testing.T) {
	tests := []struct {
		declared, want string
		ok             bool
	}{
		{"apache-2.0", "apache-2.0", true},
		{"Apache-2.0", "apache-2.0", true},
		{" MIT ", "mit", true},
		{"CC-BY-4.0", "cc-by-4.0", true},
		{"CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0", true},
		{"CC0-1.0", "cc0-1.0", true},
		{"GPL-3.0-or-later", "gpl-3.0", true},
		{"GPL-3.0-only", "gpl-3.0", true},
		{"GPL-2.0+", "gpl-2.0", true},
		{"LGPL-2.1-or-later", "lgpl-2.1", true},
		{"LGPL-2.0-only", "lgpl", true},
		{"AGPL-3.0-or-later", "agpl-3.0", true},
		{"GFDL-1.3-or-later", "gfdl", true},
		{"ODbL-1.0", "odbl", true},
		{"ODC-By-1.0", "odc-by", true},
		{"BSD-3-Clause", "bsd-3-clause", true},
		{"llama3.1", "llama3.1", true},
		{"other", "other", true},
		{"unknown", "unknown", true},
		{"", "", false},
		{"Apache 2.0", "", false},
		{"apache2", "", false},
		{"-only", "", false},
		{"apache-2.0-only-or-later", "", false},
		{"cc-by-4.0\n| x", "", false},
		{"MIT OR Apache-2.0", "", false}, // an SPDX expression: declare the one the dump is used under
	}
	for _, tt := range tests {
		got, ok := HubLicense(tt.declared)
		if got != tt.want || ok != tt.ok {
			t.Errorf("HubLicense(%q) = %q, %v; want %q, %v", tt.declared, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzHubLicense(f *testing.F) {
	for _, s := range []string{"Apache-2.0", "GPL-3.0-or-later", "GPL-2.0+", "gfdl-1.2-only", "x+", "-or-later+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := HubLicense(s)
		if ok != slices.Contains(hubLicenses, id) {
			t.Fatalf("HubLicense(%q) = %q, %v: not a Hub id", s, id, ok)
		}
		if ok {
			if again, _ := HubLicense(id); again != id {
				t.Fatalf("HubLicense(%q) = %q, but HubLicense(%q) = %q", s, id, id, again)
			}
		}
	})
}

// TestCodeInTableCell: a code span stays one cell of one table row, and
// shows its text.
func TestCodeInTableCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "-"},
		{"v1.0", "`v1.0`"},
		{"v1 | main\nsecond line", "`v1 \\| main second line`"},
		{"a\r\nb\rc", "`a b c`"},
		{"say `hi`", "`` say `hi` ``"},
		{"`x`", "`` `x` ``"},
		{"a``b", "```a``b```"},
	}
	for _, tt := range tests {
		got := code(tt.in)
		if got != tt.want {
			t.Errorf("code(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.ContainsAny(got, "\r\n") || strings.Count(got, "|") != strings.Count(got, `\|`) {
			t.Errorf("code(%q) = %q breaks a table row", tt.in, got)
		}
	}
}
