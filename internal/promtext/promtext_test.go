package promtext

import (
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const head = "# HELP x_total Things.\n# TYPE x_total counter\n"
	for _, tc := range []struct {
		name, text string
		want       map[string]float64 // nil: an error
	}{
		{"empty", "", map[string]float64{}},
		{"plain and labelled", head + "x_total 3\nx_total{a=\"1\",b=\"q\\\"\\\\\\n\"} 2.5e3\n",
			map[string]float64{"x_total": 3, `x_total{a="1",b="q\"\\\n"}`: 2500}},
		{"comment lines pass", "# just a comment\n" + head + "x_total 1\n", map[string]float64{"x_total": 1}},
		{"Inf is a number", head + "x_total{a=\"i\"} +Inf\n", map[string]float64{`x_total{a="i"}`: math.Inf(1)}},
		{"sample before its TYPE", "x_total 1\n" + head, nil},
		{"TYPE without HELP", "# TYPE x_total counter\nx_total 1\n", nil},
		{"unknown type", "# HELP x_total T.\n# TYPE x_total meter\n", nil},
		{"duplicate sample", head + "x_total 1\nx_total 2\n", nil},
		{"duplicate TYPE", head + "# TYPE x_total counter\n", nil},
		{"bad value", head + "x_total one\n", nil},
		{"unquoted label", head + "x_total{a=1} 1\n", nil},
		{"raw newline escape missing", head + "x_total{a=\"\\x\"} 1\n", nil},
		{"bad name", head + "1x 1\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.text)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("no error for %q", tc.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Samples) != len(tc.want) {
				t.Fatalf("samples %v, want %v", m.Samples, tc.want)
			}
			for k, v := range tc.want {
				if m.Samples[k] != v {
					t.Errorf("%s = %v, want %v", k, m.Samples[k], v)
				}
			}
		})
	}
	m, _ := Parse(head + "x_total{s=\"a\",r=\"1\"} 2\nx_total{s=\"a\",r=\"2\"} 3\nx_total{s=\"b\",r=\"1\"} 5\n")
	if got := m.Sum(`x_total{s="a",`); got != 5 {
		t.Errorf("Sum = %v, want 5", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"1\"} 3\n")
	f.Add("# TYPE a gauge\na 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		m, err := Parse(text)
		if err != nil {
			return
		}
		// Every accepted sample belongs to a declared family.
		for k := range m.Samples {
			name, _, _ := strings.Cut(k, "{")
			if _, ok := m.Families[name]; !ok {
				t.Fatalf("sample %q of an undeclared family", k)
			}
		}
	})
}
