package report

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// Dist holds the distributions of a set of records. It is built by
// streaming the records once; memory grows with the number of distinct
// values, plus one int per record for the token lengths.
type Dist struct {
	Records int64 `json:"records"`
	// The mix: counts by source, category tag (else the record's shape),
	// world, difficulty and language.
	Source     Counts `json:"source"`
	Category   Counts `json:"category"`
	World      Counts `json:"world,omitempty"`
	Difficulty Counts `json:"difficulty,omitempty"`
	Lang       Counts `json:"lang"`
	// Tools is tools listed per record, CallsPerTurn calls per assistant
	// turn that calls, Turns non-system messages per record, CallTurns
	// assistant turns that call.
	Tools        IntHist `json:"tools_per_record"`
	CallsPerTurn IntHist `json:"calls_per_turn"`
	Turns        IntHist `json:"turns"`
	// Tokens are the records' token lengths (the verify stage's tokens tag,
	// else counted the same way, o200k).
	Tokens Percentiles `json:"tokens"`
	// NoiseSimilarity counts the noise stage's similarity tags by bin of
	// 0.01 ("0.93" holds [0.93, 0.94)).
	NoiseSimilarity Counts `json:"noise_similarity,omitempty"`
	// VerifyFail counts records tagged verify.<check>=fail (verify with
	// action: tag).
	VerifyFail Counts `json:"verify_fail,omitempty"`

	tokens []int
}

// Counts are counts by key.
type Counts map[string]int64

// Keys returns the keys sorted by count, largest first, then by name.
func (c Counts) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

// IntHist counts integer values; JSON keys are the values.
type IntHist map[int]int64

// Values returns the values present, ascending.
func (h IntHist) Values() []int {
	vs := make([]int, 0, len(h))
	for v := range h {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// Mean is the mean value.
func (h IntHist) Mean() float64 {
	var n, sum int64
	for v, c := range h {
		n += c
		sum += int64(v) * c
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Percentiles summarise a list of values (nearest-rank percentiles).
type Percentiles struct {
	Count int64 `json:"count"`
	Min   int   `json:"min"`
	P50   int   `json:"p50"`
	P90   int   `json:"p90"`
	P99   int   `json:"p99"`
	Max   int   `json:"max"`
	Sum   int64 `json:"sum"`
}

func percentiles(vs []int) Percentiles {
	if len(vs) == 0 {
		return Percentiles{}
	}
	s := slices.Sorted(slices.Values(vs))
	at := func(p float64) int {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	var sum int64
	for _, v := range s {
		sum += int64(v)
	}
	return Percentiles{Count: int64(len(s)), Min: s[0], P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: s[len(s)-1], Sum: sum}
}

func newDist() *Dist {
	return &Dist{Source: Counts{}, Category: Counts{}, World: Counts{}, Difficulty: Counts{}, Lang: Counts{},
		Tools: IntHist{}, CallsPerTurn: IntHist{}, Turns: IntHist{}, NoiseSimilarity: Counts{}, VerifyFail: Counts{}}
}

// add counts one record.
func (d *Dist) add(r *record.Record) {
	d.Records++
	d.Source[r.Source]++
	cat := r.Tag("category")
	if cat == "" {
		cat = r.Category()
	}
	d.Category[cat]++
	if v := r.Tag("world"); v != "" {
		d.World[v]++
	}
	if v := r.Tag("difficulty"); v != "" {
		d.Difficulty[v]++
	}
	d.Lang[Lang(r)]++
	d.Tools[len(r.Tools)]++
	turns := 0
	for _, m := range r.Messages {
		if m.Role == record.RoleSystem {
			continue
		}
		turns++
		if m.Role == record.RoleAssistant && len(m.Calls) > 0 {
			d.CallsPerTurn[len(m.Calls)]++
		}
	}
	d.Turns[turns]++
	n, err := strconv.Atoi(r.Tag("tokens"))
	if err != nil {
		n = verify.RecordTokens(r)
	}
	d.tokens = append(d.tokens, n)
	if v, err := strconv.ParseFloat(r.Tag("noise_similarity"), 64); err == nil {
		d.NoiseSimilarity[strconv.FormatFloat(float64(int(v*100+1e-9))/100, 'f', 2, 64)]++
	}
	for _, t := range r.Tags {
		if check, ok := strings.CutPrefix(t.Key, "verify."); ok && t.Value == "fail" {
			d.VerifyFail[check]++
		}
	}
}

func (d *Dist) finish() {
	d.Tokens = percentiles(d.tokens)
	for _, m := range []Counts{d.World, d.Difficulty, d.NoiseSimilarity, d.VerifyFail} {
		if len(m) == 0 {
			clear(m)
		}
	}
}

// TokenValues are the token lengths, in record order.
func (d *Dist) TokenValues() []int { return d.tokens }

// Lang is the record's language: its lang tag (set by ingest for Chinese
// text and by translate), else "en" when its user turns are written in
// Latin script (the supported sources are English datasets), else "und".
func Lang(r *record.Record) string {
	if v := r.Tag("lang"); v != "" {
		return v
	}
	var latin, other int
	for _, m := range r.Messages {
		if m.Role != record.RoleUser {
			continue
		}
		for _, c := range m.Content {
			switch {
			case c < unicode.MaxASCII && unicode.IsLetter(c), unicode.Is(unicode.Latin, c):
				latin++
			case unicode.IsLetter(c):
				other++
			}
		}
	}
	if latin > 0 && latin >= 4*other {
		return "en"
	}
	return "und"
}

// Collect streams the Parquet shards refs (relative to the run dir) and
// returns their distributions, leaving out records whose ID is in skip.
func Collect(runDir string, refs []manifests.FileRef, skip map[string]bool) (*Dist, error) {
	d := newDist()
	for _, ref := range refs {
		err := shard.Scan(filepath.Join(runDir, ref.Path), func(r *record.Record) error {
			if !skip[r.ID] {
				d.add(r)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	d.finish()
	return d, nil
}

// A RejectLine is one line of a rejects file, with the rejected record or
// raw row left as JSON text.
type RejectLine struct {
	Stage  string          `json:"stage"`
	ID     string          `json:"id"`
	Source string          `json:"source"`
	Row    int64           `json:"row"`
	Reason string          `json:"reason"`
	Detail string          `json:"detail"`
	Raw    string          `json:"raw,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`
}

// ScanRejects calls fn for every line of the stage's rejects files, in
// manifest order.
func ScanRejects(runDir string, s *Stage, fn func(RejectLine) error) error {
	for _, ref := range s.Rejects() {
		if err := shard.ScanJSONL(filepath.Join(runDir, ref.Path), fn); err != nil {
			return err
		}
	}
	return nil
}

// RejectSamples returns the first reject of each reason of the stage.
func RejectSamples(runDir string, s *Stage) (map[string]RejectLine, error) {
	out := map[string]RejectLine{}
	want := len(s.Totals().Rejected)
	err := ScanRejects(runDir, s, func(rl RejectLine) error {
		if _, ok := out[rl.Reason]; !ok {
			out[rl.Reason] = rl
			if len(out) == want {
				return errStop
			}
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return out, err
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}

// rejectedIDs returns the IDs a stage rejected.
func rejectedIDs(runDir string, s *Stage) (map[string]bool, error) {
	ids := map[string]bool{}
	err := ScanRejects(runDir, s, func(rl RejectLine) error {
		ids[rl.ID] = true
		return nil
	})
	return ids, err
}

// ExportDist returns the distributions of the records an export stage
// wrote: its input shards less the records it rejected.
func ExportDist(runDir string, s *Stage) (*Dist, error) {
	if s.Manifest == nil {
		return newDist(), nil
	}
	skip, err := rejectedIDs(runDir, s)
	if err != nil {
		return nil, err
	}
	var refs []manifests.FileRef
	for _, sh := range s.Manifest.Shards {
		for _, in := range sh.Inputs {
			if strings.HasSuffix(in.Path, ".parquet") {
				refs = append(refs, in)
			}
		}
	}
	return Collect(runDir, refs, skip)
}
