// Package promtext reads the Prometheus text exposition format (version
// 0.0.4) strictly enough for tests to check what augment serves at
// /metrics: every sample must belong to a family declared by # HELP and
// # TYPE before it, names and labels must be well formed, values must be
// numbers, and no sample may appear twice.
package promtext

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Family is a declared metric family.
type Family struct{ Help, Type string }

// Metrics are the parsed families and samples; samples are keyed by
// `name{label="value",...}` exactly as written (label values escaped).
type Metrics struct {
	Families map[string]Family
	Samples  map[string]float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)$`)
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	types      = map[string]bool{"counter": true, "gauge": true, "summary": true, "histogram": true, "untyped": true}
)

// Parse reads text; the first malformed line is an error naming it.
func Parse(text string) (*Metrics, error) {
	m := &Metrics{Families: map[string]Family{}, Samples: map[string]float64{}}
	helps := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s: %q", i+1, fmt.Sprintf(format, args...), line)
		}
		switch {
		case line == "" && text == "":
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(line, " ", 4)
			if len(f) < 4 || f[3] == "" || !metricName.MatchString(f[2]) {
				return nil, bad("HELP without a name and text")
			}
			if _, dup := helps[f[2]]; dup {
				return nil, bad("second HELP of %s", f[2])
			}
			helps[f[2]] = f[3]
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 || !types[f[3]] || !metricName.MatchString(f[2]) {
				return nil, bad("bad TYPE")
			}
			if _, dup := m.Families[f[2]]; dup {
				return nil, bad("second TYPE of %s", f[2])
			}
			m.Families[f[2]] = Family{Help: helps[f[2]], Type: f[3]}
		case strings.HasPrefix(line, "#"):
			// a comment
		default:
			s := sampleLine.FindStringSubmatch(line)
			if s == nil {
				return nil, bad("not a sample")
			}
			fam, ok := m.Families[s[1]]
			if !ok || fam.Help == "" {
				return nil, bad("sample of a family without HELP and TYPE before it")
			}
			v, err := strconv.ParseFloat(s[3], 64)
			if err != nil {
				return nil, bad("value: %v", err)
			}
			key := s[1] + s[2]
			if _, dup := m.Samples[key]; dup {
				return nil, bad("sample written twice")
			}
			m.Samples[key] = v
		}
	}
	return m, nil
}

// Sum adds the samples whose key starts with prefix, e.g.
// `augment_stage_rejected_records{stage="reason",`.
func (m *Metrics) Sum(prefix string) float64 {
	var n float64
	for k, v := range m.Samples {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}
