package report

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/augmentdata/augment/internal/swar"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/near"
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
	// Tokens are the records' token lengths: the verify stage's tokens tag,
	// else counted the same way (o200k) on a seeded sample of about
	// tokenSample records, since counting costs far more than reading
	// (Tokens.Count says how many were counted; see SampleBelow).
	Tokens Percentiles `json:"tokens"`
	// NoiseSimilarity counts the noise stage's similarity tags by bin of
	// 0.01 ("0.93" holds [0.93, 0.94)).
	NoiseSimilarity Counts `json:"noise_similarity,omitempty"`
	// VerifyFail counts records tagged verify.<check>=fail (verify with
	// action: tag).
	VerifyFail Counts `json:"verify_fail,omitempty"`
	// Teacher counts the records each stage changed with a teacher, by
	// "stage provider model" from their lineage (rule steps left out).
	Teacher Counts `json:"teacher,omitempty"`

	// tagged counts the token lengths read from tokens tags; sample holds
	// the lengths counted for records without one, with their ID's hash,
	// so that parts counted under different thresholds merge into one
	// sample (merge keeps the smaller threshold, finish applies it).
	tagged IntHist
	sample []sampled
	// sampleBelow: a record without a tokens tag is counted when the hash
	// of its ID is below it (MaxUint64: every record).
	sampleBelow uint64
	memo        *verify.TokenMemo
	tokenHist   IntHist // every length counted, made by finish
}

// sampled is the token length n of a record whose ID hashes to h.
type sampled struct {
	H uint64 `json:"h"`
	N int    `json:"n"`
}

// tokenSample is about how many records without a tokens tag have their
// tokens counted.
const tokenSample = 5000

// SampleBelow is the token sample's threshold for rows records: a record
// without a tokens tag is counted when the hash of its ID (idHash) is below
// it, about tokenSample records of rows (all of them up to tokenSample).
// The scan of an older run dir uses the rows it reads; a run uses the
// records ingest handed to the chain, known before any shard of a later
// stage is written (Partial).
func SampleBelow(rows int64) uint64 {
	if rows <= tokenSample {
		return math.MaxUint64
	}
	return uint64(float64(math.MaxUint64) * tokenSample / float64(rows))
}

// inSample reports whether a record whose ID hashes to h is in the sample
// below.
func inSample(h, below uint64) bool { return below == math.MaxUint64 || h < below }

// idHash is the FNV-64a hash of id through a 64-bit finaliser (near.Mix):
// FNV alone differs little in its high bits between IDs that differ in
// their last characters, so a threshold on it took runs of sequential IDs
// ("glaive:0" …) together and left others out, a sample biased wherever the
// rows' order means something (a dump sorted by length or topic).
func idHash(id string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * prime
	}
	return near.Mix(h)
}

// errNoTag stands for strconv's error on an absent tag.
var errNoTag = errors.New("no tag")

// atoiTag is strconv.Atoi(v), without allocating an error for "".
func atoiTag(v string) (int, error) {
	if v == "" {
		return 0, errNoTag
	}
	return strconv.Atoi(v)
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

// percentilesOf summarises the values counted in h.
func percentilesOf(h IntHist) Percentiles {
	vs := h.Values()
	var n, sum int64
	for _, v := range vs {
		n += h[v]
		sum += int64(v) * h[v]
	}
	if n == 0 {
		return Percentiles{}
	}
	// at is the nearest-rank value of percentile p: the value of rank
	// ceil(p·n) (1-based) in ascending order.
	at := func(p float64) int {
		i := min(max(int64(p*float64(n)+0.999999)-1, 0), n-1)
		for _, v := range vs {
			if i < h[v] {
				return v
			}
			i -= h[v]
		}
		return vs[len(vs)-1]
	}
	return Percentiles{Count: n, Min: vs[0], P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: vs[len(vs)-1], Sum: sum}
}

func newDist() *Dist {
	return &Dist{sampleBelow: math.MaxUint64, Source: Counts{}, Category: Counts{}, World: Counts{}, Difficulty: Counts{}, Lang: Counts{},
		Tools: IntHist{}, CallsPerTurn: IntHist{}, Turns: IntHist{}, NoiseSimilarity: Counts{}, VerifyFail: Counts{}, Teacher: Counts{},
		tagged: IntHist{}}
}

// add counts one record.
func (d *Dist) add(r *record.Record) {
	d.Records++
	d.Source[r.Source]++
	tags := tagsOf(r)
	cat := tags.category
	if cat == "" {
		cat = r.Category()
	}
	d.Category[cat]++
	if v := tags.world; v != "" {
		d.World[v]++
	}
	if v := tags.difficulty; v != "" {
		d.Difficulty[v]++
	}
	d.Lang[langOf(r, tags.lang)]++
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
	// (An absent tag is skipped before parsing: the parsers allocate their
	// errors, two per record.)
	if n, err := atoiTag(tags.tokens); err == nil {
		d.tagged[n]++
	} else if h := idHash(r.ID); inSample(h, d.sampleBelow) {
		d.sample = append(d.sample, sampled{H: h, N: d.memo.RecordTokens(r)})
	}
	if v := tags.noiseSimilarity; v != "" {
		if v, err := strconv.ParseFloat(v, 64); err == nil {
			d.NoiseSimilarity[strconv.FormatFloat(float64(int(v*100+1e-9))/100, 'f', 2, 64)]++
		}
	}
	for _, s := range r.Lineage {
		if s.Provider != "rule" {
			d.Teacher[s.Stage+" "+s.Provider+" "+s.Model]++
		}
	}
	for _, t := range r.Tags {
		if check, ok := strings.CutPrefix(t.Key, "verify."); ok && t.Value == "fail" {
			d.VerifyFail[check]++
		}
	}
}

// distTags are the values of the tags add reads, as Record.Tag finds them
// ("" when absent).
type distTags struct {
	category, world, difficulty, lang, tokens, noiseSimilarity string
}

// tagsOf returns what r.Tag gives for each key add counts. A list sorted
// by key, as SetTag keeps it, is read in one pass, which takes the first
// tag of a key as Tag's binary search finds it; a list out of order is
// read through Tag.
func tagsOf(r *record.Record) distTags {
	for i := 1; i < len(r.Tags); i++ {
		if r.Tags[i].Key < r.Tags[i-1].Key {
			return distTags{category: r.Tag("category"), world: r.Tag("world"), difficulty: r.Tag("difficulty"),
				lang: r.Tag("lang"), tokens: r.Tag("tokens"), noiseSimilarity: r.Tag("noise_similarity")}
		}
	}
	var t distTags
	var seen uint8
	for _, tag := range r.Tags {
		var dst *string
		var bit uint8
		switch tag.Key {
		case "category":
			dst, bit = &t.category, 1
		case "world":
			dst, bit = &t.world, 2
		case "difficulty":
			dst, bit = &t.difficulty, 4
		case "lang":
			dst, bit = &t.lang, 8
		case "tokens":
			dst, bit = &t.tokens, 16
		case "noise_similarity":
			dst, bit = &t.noiseSimilarity, 32
		default:
			continue
		}
		if seen&bit == 0 {
			seen |= bit
			*dst = tag.Value
		}
	}
	return t
}

// finish summarises the token lengths: the tagged ones and those of the
// sample below d.sampleBelow.
func (d *Dist) finish() {
	d.tokenHist = maps.Clone(d.tagged)
	if d.tokenHist == nil {
		d.tokenHist = IntHist{}
	}
	for _, s := range d.sample {
		if inSample(s.H, d.sampleBelow) {
			d.tokenHist[s.N]++
		}
	}
	d.Tokens = percentilesOf(d.tokenHist)
}

// TokenHist counts the token lengths Tokens summarises.
func (d *Dist) TokenHist() IntHist { return d.tokenHist }

// Lang is the record's language: its lang tag (set by ingest for Chinese
// text and by translate), else "en" when its user turns are written in
// Latin script (the supported sources are English datasets), "zh" when
// they hold at least as many Han characters as Latin letters (a Chinese
// question whose answer is code, which ingest's tag, counting the answers
// too, leaves out), else "und".
func Lang(r *record.Record) string { return langOf(r, r.Tag("lang")) }

// langOf is Lang of r whose lang tag is tag.
func langOf(r *record.Record, tag string) string {
	if tag != "" {
		return tag
	}
	// User turns in ASCII alone, most English records', need no count:
	// their letters are all Latin ones, so they are "en" when they hold one.
	ascii, letter := true, false
	for _, m := range r.Messages {
		if m.Role == record.RoleUser {
			if !swar.ASCII(m.Content) {
				ascii = false
				break
			}
			letter = letter || hasASCIILetter(m.Content)
		}
	}
	if ascii {
		if letter {
			return "en"
		}
		return "und"
	}
	return langCounted(r)
}

// langCounted is Lang of r without a lang tag, its user turns' letters
// counted.
func langCounted(r *record.Record) string {
	var latin, other, han int
	for _, m := range r.Messages {
		if m.Role == record.RoleUser {
			l, o, h := letters(m.Content)
			latin, other, han = latin+l, other+o, han+h
		}
	}
	switch {
	case latin > 0 && latin >= 4*other:
		return "en"
	case han > 0 && han >= latin && 2*han >= other:
		return "zh"
	}
	return "und"
}

// hasASCIILetter reports whether s holds a letter of ASCII.
func hasASCIILetter(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; 'a' <= c && c <= 'z' {
			return true
		}
	}
	return false
}

// letters counts the letters of s in Latin script, the other letters, and
// of those the Han characters (a byte that is not UTF-8 is none). ASCII is not decoded: its letters
// are Latin's, counted eight bytes at a time (swar.Letters) while whole
// words are ASCII, else byte by byte; decoding each was most of the
// report's work on English records.
func letters(s string) (latin, other, han int) {
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			if w := swar.Load(s, i); w&swar.Tops == 0 {
				latin += swar.Letters(w)
				i += 8
				continue
			}
		}
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c|0x20 && c|0x20 <= 'z' {
				latin++
			}
			i++
			continue
		}
		c, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case unicode.Is(unicode.Latin, c):
			latin++
		case unicode.Is(unicode.Han, c):
			han++
			other++
		case unicode.IsLetter(c):
			other++
		}
	}
	return latin, other, han
}

// collect reads the Parquet shards refs (relative to the run dir), one
// shard per CPU at a time, and returns their distributions, leaving out
// records whose ID is in skip. Token counts go through memo: the sample is
// chosen by record ID, so each stage's sample holds the same records.
func collect(runDir string, refs []manifests.FileRef, skip map[string]bool, memo *verify.TokenMemo) (*Dist, error) {
	var rows int64
	for _, ref := range refs {
		rows += ref.Rows
	}
	return scan(runDir, refs, skip, memo, SampleBelow(rows))
}

// scan is collect with the token sample below.
func scan(runDir string, refs []manifests.FileRef, skip map[string]bool, memo *verify.TokenMemo, below uint64) (*Dist, error) {
	parts := make([]*Dist, len(refs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, ref := range refs {
		g.Go(func() error {
			d := newDist()
			d.sampleBelow, d.memo = below, memo
			parts[i] = d
			return shard.Scan(filepath.Join(runDir, ref.Path), func(r *record.Record) error {
				if !skip[r.ID] {
					d.add(r)
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d := newDist()
	for _, p := range parts {
		d.merge(p)
	}
	d.finish()
	return d, nil
}

// merge adds o's counts to d.
func (d *Dist) merge(o *Dist) {
	d.Records += o.Records
	for _, m := range []struct{ dst, src Counts }{{d.Source, o.Source}, {d.Category, o.Category}, {d.World, o.World},
		{d.Difficulty, o.Difficulty}, {d.Lang, o.Lang}, {d.NoiseSimilarity, o.NoiseSimilarity}, {d.VerifyFail, o.VerifyFail},
		{d.Teacher, o.Teacher}} {
		for k, v := range m.src {
			m.dst[k] += v
		}
	}
	for _, h := range []struct{ dst, src IntHist }{{d.Tools, o.Tools}, {d.CallsPerTurn, o.CallsPerTurn}, {d.Turns, o.Turns}} {
		for k, v := range h.src {
			h.dst[k] += v
		}
	}
	for k, v := range o.tagged {
		d.tagged[k] += v
	}
	d.sample = append(d.sample, o.sample...)
	d.sampleBelow = min(d.sampleBelow, o.sampleBelow)
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
// wrote: merged from its shards' partials, or, in a run dir written before
// partials existed, read from its input shards less the records it
// rejected.
func (r *Run) ExportDist(s *Stage) (*Dist, error) {
	if s.Manifest == nil {
		return newDist(), nil
	}
	if pd, err := r.partials(s); err != nil || pd != nil {
		if err != nil {
			return nil, err
		}
		return pd.written, nil
	}
	skip, err := rejectedIDs(r.Dir, s)
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
	return r.Collect(refs, skip)
}

// Collect is the package's Collect over the run directory, remembered for
// the same shards and skip set (the report and each export's card often
// read the same records).
func (r *Run) Collect(refs []manifests.FileRef, skip map[string]bool) (*Dist, error) {
	h := sha256.New()
	for _, ref := range refs {
		fmt.Fprintf(h, "%s %s\n", ref.Path, ref.SHA256)
	}
	for _, id := range slices.Sorted(keysOf(skip)) {
		fmt.Fprintf(h, "skip %s\n", id)
	}
	key := string(h.Sum(nil))
	for _, ref := range refs {
		if ref.NotKept {
			return nil, notKeptError(ref)
		}
	}
	if d, ok := r.collected[key]; ok {
		return d, nil
	}
	d, err := collect(r.Dir, refs, skip, &r.tokens)
	if err != nil {
		return nil, err
	}
	if r.collected == nil {
		r.collected = map[string]*Dist{}
	}
	r.collected[key] = d
	return d, nil
}
