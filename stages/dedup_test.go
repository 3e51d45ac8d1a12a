package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
)

// synthWords is a vocabulary of made-up words, large enough that two
// generated queries share few character 5-grams.
func synthWord(r *rand.Rand) string {
	const cons, vow = "bcdfghjklmnprstvwz", "aeiou"
	n := 2 + r.IntN(3)
	var sb strings.Builder
	for range n {
		sb.WriteByte(cons[r.IntN(len(cons))])
		sb.WriteByte(vow[r.IntN(len(vow))])
	}
	return sb.String()
}

// synthRecord makes a distinct tool-use record: a query of 30–45 made-up
// words and one call with three arguments.
func synthRecord(r *rand.Rand, source string, row int) *record.Record {
	words := make([]string, 30+r.IntN(16))
	for i := range words {
		words[i] = synthWord(r)
	}
	args := fmt.Sprintf(`{"alpha":%q,"beta":%d,"gamma":%q}`, synthWord(r), r.IntN(100000), synthWord(r)+" "+synthWord(r))
	return &record.Record{
		ID: fmt.Sprintf("%s:%d", source, row), Source: source, Row: int64(row),
		Tools: []record.Tool{{Name: "lookup_" + synthWord(r), Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		Messages: []record.Message{
			{Role: record.RoleUser, Content: strings.Join(words, " ") + "?"},
			{Role: record.RoleAssistant, Calls: []record.Call{{Name: "lookup_" + synthWord(r), Arguments: json.RawMessage(args)}}},
			{Role: record.RoleTool, Results: []record.Result{{Name: "lookup", Content: `{"ok":true}`}}},
			{Role: record.RoleAssistant, Content: "Done: " + synthWord(r)},
		},
	}
}

// Kinds of planted duplicates.
const (
	plantExact     = "exact"     // same text up to case and punctuation
	plantReworded  = "reworded"  // one or two words of the query replaced
	plantReordered = "reordered" // the call's arguments in another order
)

// plant returns a duplicate of orig of the given kind with a new ID.
func plant(r *rand.Rand, orig *record.Record, kind, source string, row int) *record.Record {
	c := orig.Clone()
	c.ID, c.Source, c.Row = fmt.Sprintf("%s:%d", source, row), source, int64(row)
	q := &c.Messages[0].Content
	switch kind {
	case plantExact:
		*q = strings.ToUpper((*q)[:1]) + (*q)[1:] + "!!"
		c.Messages[3].Content = "something else entirely" // not among the compared fields
	case plantReworded:
		ws := strings.Fields(*q)
		for range 1 + r.IntN(2) {
			ws[r.IntN(len(ws))] = "please"
		}
		*q = strings.Join(ws, " ")
	case plantReordered:
		var args map[string]any
		json.Unmarshal(c.Messages[1].Calls[0].Arguments, &args)
		c.Messages[1].Calls[0].Arguments = json.RawMessage(fmt.Sprintf(`{"gamma":%q,"beta":%v,"alpha":%q}`, args["gamma"], args["beta"], args["alpha"]))
	}
	return c
}

// plantedSet is n distinct records over three sources plus planted
// duplicates; want maps every planted ID to the ID of the record it copies.
func plantedSet(seed uint64, n, planted int) (recs []*record.Record, want map[string]string, kinds map[string]string) {
	r := rand.New(rand.NewPCG(seed, 99))
	sources := []string{"glaive", "xlam", "toolace"}
	rows := map[string]int{}
	next := func() (string, int) {
		s := sources[r.IntN(len(sources))]
		rows[s]++
		return s, rows[s]
	}
	for range n {
		s, row := next()
		recs = append(recs, synthRecord(r, s, row))
	}
	want, kinds = map[string]string{}, map[string]string{}
	all := []string{plantExact, plantReworded, plantReordered}
	used := map[int]bool{}
	for i := range planted {
		k := r.IntN(n)
		for used[k] { // one copy per original: every cluster is a pair
			k = r.IntN(n)
		}
		used[k] = true
		orig := recs[k]
		s, row := next()
		c := plant(r, orig, all[i%len(all)], s, row)
		want[c.ID], kinds[c.ID] = orig.ID, all[i%len(all)]
		recs = append(recs, c)
	}
	return recs, want, kinds
}

func buildDedup(t testing.TB, cfg DedupConfig, seed uint64) *deduper {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatal(probs)
	}
	st, err := cfg.build(&Env{Stage: "dedup", Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return st.(*deduper)
}

// dedupRun plans over recs and processes them; it returns removed ID → kept
// ID and removed ID → reason.
func dedupRun(t testing.TB, d *deduper, recs []*record.Record) (map[string]string, map[string]string) {
	t.Helper()
	_, err := d.Plan(context.Background(), func(yield func(*record.Record) error) error {
		for _, r := range recs {
			if err := yield(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	removed, reasons := map[string]string{}, map[string]string{}
	for _, r := range recs {
		out, err := d.Process(context.Background(), r)
		var rj *contract.Reject
		switch {
		case errors.As(err, &rj):
			keeper, _, _ := strings.Cut(strings.TrimPrefix(rj.Detail, "duplicate_of="), " ")
			removed[r.ID], reasons[r.ID] = keeper, rj.Reason
		case err != nil:
			t.Fatal(err)
		case len(out) != 1 || out[0] != r:
			t.Fatalf("%s: kept records must pass unchanged", r.ID)
		}
	}
	return removed, reasons
}

// TestDedupPlanted: every planted duplicate is found, each pair ends in one
// cluster, and no distinct record is touched (precision and recall 1).
func TestDedupPlanted(t *testing.T) {
	recs, want, kinds := plantedSet(1, 3000, 300)
	d := buildDedup(t, DedupConfig{}, 7)
	removed, reasons := dedupRun(t, d, recs)
	// Each planted pair must lose exactly one member, and keep the other.
	var missed, wrong []string
	pairOf := map[string]string{}
	for c, o := range want {
		pairOf[c], pairOf[o] = o, c
	}
	for c, o := range want {
		_, cGone := removed[c]
		_, oGone := removed[o]
		switch {
		case !cGone && !oGone:
			missed = append(missed, kinds[c]+" "+c)
		case cGone && removed[c] != o, oGone && removed[o] != c:
			wrong = append(wrong, c)
		}
	}
	var extra []string
	for id := range removed {
		if _, ok := pairOf[id]; !ok {
			extra = append(extra, id)
		}
	}
	if len(missed)+len(wrong)+len(extra) > 0 {
		t.Errorf("missed %d %v; wrong keeper %v; distinct records removed %v", len(missed), missed, wrong, extra)
	}
	if len(removed) != len(want) {
		t.Errorf("removed %d records, want %d", len(removed), len(want))
	}
	for id, reason := range reasons {
		c := id
		if _, ok := want[c]; !ok {
			c = pairOf[id]
		}
		wantReason := ReasonNearDuplicate
		if kinds[c] != plantReworded {
			wantReason = ReasonDuplicate
		}
		if reason != wantReason {
			t.Errorf("%s (%s): reason %s, want %s", id, kinds[c], reason, wantReason)
		}
	}
}

// TestDedupExactOnly: mode exact finds the case/punctuation and argument
// order copies, not the reworded ones.
func TestDedupExactOnly(t *testing.T) {
	recs, want, kinds := plantedSet(2, 500, 60)
	removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact}, 7), recs)
	for c, o := range want {
		_, cGone := removed[c]
		_, oGone := removed[o]
		if found := cGone || oGone; found != (kinds[c] != plantReworded) {
			t.Errorf("%s copy %s: removed %v", kinds[c], c, found)
		}
	}
	if len(removed) != 40 {
		t.Errorf("removed %d, want the 40 exact and reordered copies", len(removed))
	}
}

// TestDedupIndependentOfOrder: the decisions do not depend on input order
// or on how many CPUs sign.
func TestDedupIndependentOfOrder(t *testing.T) {
	recs, _, _ := plantedSet(3, 800, 120)
	first, _ := dedupRun(t, buildDedup(t, DedupConfig{}, 5), recs)
	shuffled := slices.Clone(recs)
	rand.New(rand.NewPCG(9, 9)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	second, _ := dedupRun(t, buildDedup(t, DedupConfig{}, 5), shuffled)
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Error("shuffled input gave other decisions")
	}
	// Another seed may keep other members, but removes as many.
	third, _ := dedupRun(t, buildDedup(t, DedupConfig{}, 6), recs)
	if len(third) != len(first) {
		t.Errorf("seed 6 removed %d, seed 5 %d", len(third), len(first))
	}
}

// TestDedupPreferAndScope: prefer decides the kept source; scope within
// compares records of one source only.
func TestDedupPreferAndScope(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	a := synthRecord(r, "glaive", 1)
	recs := []*record.Record{a, plant(r, a, plantExact, "xlam", 1), plant(r, a, plantExact, "toolace", 1), plant(r, a, plantReordered, "xlam", 2)}
	removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Prefer: []string{"toolace", "xlam"}}, 1), recs)
	if len(removed) != 3 || removed["glaive:1"] != "toolace:1" || removed["xlam:1"] != "toolace:1" {
		t.Errorf("prefer toolace: removed %v", removed)
	}
	removed, _ = dedupRun(t, buildDedup(t, DedupConfig{Scope: ScopeWithin}, 1), recs)
	if len(removed) != 1 || (removed["xlam:1"] != "xlam:2" && removed["xlam:2"] != "xlam:1") {
		t.Errorf("scope within: removed %v, want one of the two xlam records", removed)
	}
}

// TestDedupFields: the compared fields decide what a duplicate is.
func TestDedupFields(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	a := synthRecord(r, "s", 1)
	b := a.Clone()
	b.ID, b.Row = "s:2", 2
	b.Messages[1].Calls[0].Arguments = json.RawMessage(`{"alpha":"other","beta":1,"gamma":"x y"}`)
	removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact}, 1), []*record.Record{a, b})
	if len(removed) != 0 {
		t.Errorf("other calls, fields user+calls: removed %v", removed)
	}
	removed, _ = dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact, Fields: []string{FieldUser}}, 1), []*record.Record{a, b})
	if len(removed) != 1 {
		t.Errorf("fields user: removed %v, want one", removed)
	}
	empty := &record.Record{ID: "s:3", Messages: []record.Message{{Role: record.RoleUser, Content: "?!"}}}
	empty2 := &record.Record{ID: "s:4", Messages: []record.Message{{Role: record.RoleUser, Content: "..."}}}
	removed, _ = dedupRun(t, buildDedup(t, DedupConfig{}, 1), []*record.Record{empty, empty2})
	if len(removed) != 0 {
		t.Errorf("records without words are kept: removed %v", removed)
	}
}

func TestDedupDuplicateIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	a := synthRecord(r, "s", 1)
	d := buildDedup(t, DedupConfig{}, 1)
	_, err := d.Plan(context.Background(), func(yield func(*record.Record) error) error {
		yield(a)
		return yield(a)
	})
	if err == nil || !strings.Contains(err.Error(), "s:1, s:1") {
		t.Errorf("an ID twice: %v", err)
	}
}

func TestDedupValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  DedupConfig
		want string
	}{
		{DedupConfig{Fields: []string{"user", "body"}}, `fields[1]: "body"`},
		{DedupConfig{Mode: "fuzzy"}, "mode"},
		{DedupConfig{Shingle: "line"}, "shingle"},
		{DedupConfig{Rows: 9}, "rows"},
		{DedupConfig{Threshold: 1.5}, "threshold"},
		{DedupConfig{Scope: "global"}, "scope"},
	} {
		tc.cfg.defaults()
		if probs := strings.Join(tc.cfg.validate(), "; "); !strings.Contains(probs, tc.want) {
			t.Errorf("%+v: problems %q, want %q", tc.cfg, probs, tc.want)
		}
	}
}

// TestDedupThresholdWarning: a threshold where a pair is a candidate less
// often than not is a warning, with advice when some bands and rows (at most
// 64 bands, as many MinHash values) find it 9 times in 10.
func TestDedupThresholdWarning(t *testing.T) {
	for _, tc := range []struct {
		cfg  DedupConfig
		want string // "" for no warning
	}{
		{DedupConfig{}, ""},
		{DedupConfig{Threshold: 0.7}, ""}, // 57 %
		{DedupConfig{Threshold: 0.6, Mode: DedupExact}, ""},
		// The 50 % point to three places: at 0.68 the warning read "48 %
		// at J = 0.68 and 50 % at J = 0.68" (QA).
		{DedupConfig{Threshold: 0.68}, "48 % at J = 0.68 and 50 % at J = 0.685"},
		{DedupConfig{Threshold: 0.6}, "21 % at J = 0.60 and 50 % at J = 0.685, so most pairs near the threshold are never compared; bands: 28, rows: 4 find one at J = 0.60 with probability 98 % (50 % at J = 0.395)"},
		{DedupConfig{Threshold: 0.8, Bands: 3, Rows: 8}, "bands 3 × rows 8: a pair becomes a candidate with probability 1-(1-J^rows)^bands, 42 % at J = 0.80 and 50 % at J = 0.821, so most pairs near the threshold are never compared; bands: 6, rows: 4 find one"},
		{DedupConfig{Threshold: 0.1}, "are never compared"}, // no bands and rows within 64 bands
	} {
		tc.cfg.defaults()
		got := strings.Join(tc.cfg.warnings(), "\n")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || (tc.cfg.Threshold == 0.1 && strings.Contains(got, "bands:")) {
			t.Errorf("%+v: warnings %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

func TestCallTextSorted(t *testing.T) {
	a := callText(record.Call{Name: "f", Arguments: json.RawMessage(`{"b":{"y":1,"x":[true,null]},"a":"v"}`)})
	b := callText(record.Call{Name: "f", Arguments: json.RawMessage(`{"a":"v","b":{"x":[true,null],"y":1}}`)})
	if a != b || a != "f a v b x true null y 1" {
		t.Errorf("callText = %q and %q", a, b)
	}
	if got := callText(record.Call{Name: "f", Arguments: json.RawMessage(`not json`)}); got != "f not json" {
		t.Errorf("callText of bad JSON = %q", got)
	}
	if near.Normalize(a) != "f a v b x true null y 1" {
		t.Error(near.Normalize(a))
	}
	// callKey: the same sorting, with types, lengths and brackets.
	ka := callKey(record.Call{Name: "f", Arguments: json.RawMessage(`{"b":{"y":1,"x":[true,null]},"a":"v"}`)})
	kb := callKey(record.Call{Name: "f", Arguments: json.RawMessage(`{"a":"v","b":{"x":[true,null],"y":1}}`)})
	if want := " s1:f { s1:a s1:v s1:b { s1:x [ t z ] s1:y n1 } }"; ka != kb || ka != want {
		t.Errorf("callKey = %q and %q, want %q", ka, kb, want)
	}
	if got := callKey(record.Call{Name: "f", Arguments: json.RawMessage(`not json`)}); got != " s1:f r8:not json" {
		t.Errorf("callKey of bad JSON = %q", got)
	}
}

// bookingRecord is a one-call booking dialogue whose tool takes an integer
// "people" and an enum "currency"; args are the call's arguments.
func bookingRecord(id, source, args string) *record.Record {
	return &record.Record{ID: id, Source: source,
		Tools: []record.Tool{{Name: "book_table", Description: "Book a restaurant table", Parameters: json.RawMessage(
			`{"type":"object","properties":{"people":{"type":"integer"},"currency":{"type":"string","enum":["USD","EUR"]}},"required":["people"]}`)}},
		Messages: []record.Message{
			{Role: record.RoleUser, Content: "Book a table for four people tonight, paying in dollars"},
			{Role: record.RoleAssistant, Calls: []record.Call{{Name: "book_table", Arguments: json.RawMessage(args)}}},
			{Role: record.RoleTool, Results: []record.Result{{Name: "book_table", Content: `{"booked": true}`}}},
			{Role: record.RoleAssistant, Content: "Booked."},
		}}
}

// TestDedupExactKeepsTypesAndCase: the exact comparison tells a string
// argument from a number and "USD" from "usd" (different arguments for a
// tool), but not reordered keys or other JSON spacing; near mode, which
// reads lowercased words, finds such records the same (similarity 1).
func TestDedupExactKeepsTypesAndCase(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"people":4}`, `{"people":"4"}`, false},
		{`{"people":4,"currency":"USD"}`, `{"people":4,"currency":"usd"}`, false},
		{`{"people":4}`, `{"people":4.0}`, false},
		{`{"people":4,"currency":"USD"}`, `{ "currency" : "\u0055SD", "people" : 4 }`, true},
		{`{"people":[4]}`, `{"people":4}`, false},
		{`{"people":null}`, `{"people":"null"}`, false},
		{`{"people":true}`, `{"people":"true"}`, false},
	} {
		recs := []*record.Record{bookingRecord("s:1", "s", tc.a), bookingRecord("s:2", "s", tc.b)}
		removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact}, 1), recs)
		if got := len(removed) == 1; got != tc.same {
			t.Errorf("exact: %s and %s: removed %v, want duplicates %v", tc.a, tc.b, removed, tc.same)
		}
		if tc.same {
			continue
		}
		removed, reasons := dedupRun(t, buildDedup(t, DedupConfig{}, 1), recs)
		if len(removed) != 1 || (reasons["s:1"] != ReasonNearDuplicate && reasons["s:2"] != ReasonNearDuplicate) {
			t.Errorf("both: %s and %s: removed %v %v, want one near duplicate", tc.a, tc.b, removed, reasons)
		}
	}
}

// TestDedupKeepsConformingCopy: of duplicates, the one whose calls fit its
// tools' parameters (and name a listed tool) is kept, whatever the seed and
// before prefer, so a later verify args_schema does not reject the only
// copy.
func TestDedupKeepsConformingCopy(t *testing.T) {
	unlisted := bookingRecord("c:3", "c", `{"people":4,"currency":"USD"}`)
	unlisted.Tools = []record.Tool{{Name: "cancel_table", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	recs := []*record.Record{bookingRecord("a:1", "a", `{"people":"4","currency":"USD"}`), bookingRecord("b:2", "b", `{"people":4,"currency":"USD"}`),
		bookingRecord("c:1", "c", `{"currency":"usd","people":4}`), unlisted}
	for _, mode := range []string{DedupBoth, DedupNear} {
		for seed := range uint64(24) {
			removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: mode, Prefer: []string{"a", "c"}}, seed), recs)
			if _, gone := removed["b:2"]; gone || len(removed) != len(recs)-1 {
				t.Fatalf("mode %s, seed %d: removed %v, want all but b:2 (the one whose call fits book_table)", mode, seed, removed)
			}
		}
	}
	// Among conforming copies, prefer and the seeded hash decide as before.
	recs = []*record.Record{bookingRecord("a:5", "a", `{"people":4}`), bookingRecord("b:6", "b", `{"people":4}`), bookingRecord("a:7", "a", `{"people":"4"}`)}
	removed, _ := dedupRun(t, buildDedup(t, DedupConfig{Prefer: []string{"a"}}, 1), recs)
	if len(removed) != 2 || removed["b:6"] != "a:5" || removed["a:7"] != "a:5" {
		t.Errorf("prefer a among valid copies: removed %v, want b:6 and a:7 duplicates of a:5", removed)
	}
}

func TestSizeRange(t *testing.T) {
	for n, want := range map[int]string{2: "2", 3: "3-4", 4: "3-4", 5: "5-8", 8: "5-8", 9: "9-16", 100: "65-128"} {
		if got := sizeRange(n); got != want {
			t.Errorf("sizeRange(%d) = %s, want %s", n, got, want)
		}
	}
}

// dedupStream yields n generated records, about one in ten a planted copy
// (exact, reworded or reordered) of an earlier one, without holding them;
// planted, when not nil, is set to the number of copies, and pair, when not
// nil, is called with each copy's ID and its original's.
func dedupStream(n int, planted *int, pair func(copyID, origID string)) func(yield func(*record.Record) error) error {
	return func(yield func(*record.Record) error) error {
		r := rand.New(rand.NewPCG(1, 1))
		vocab := make([]string, 5000)
		for i := range vocab {
			vocab[i] = synthWord(r)
		}
		var recent []*record.Record
		kinds := []string{plantExact, plantReworded, plantReordered}
		for i := range n {
			var rec *record.Record
			if len(recent) > 0 && r.IntN(10) == 0 {
				k := r.IntN(len(recent))
				rec = plant(r, recent[k], kinds[i%3], "planted", i)
				if pair != nil {
					pair(rec.ID, recent[k].ID)
				}
				// One copy per original, so every cluster is a pair and
				// a perfect run removes exactly the planted count.
				recent = slices.Delete(recent, k, k+1)
				if planted != nil {
					*planted++
				}
			} else {
				ws := make([]string, 30+r.IntN(16))
				for j := range ws {
					ws[j] = vocab[r.IntN(len(vocab))]
				}
				rec = &record.Record{ID: fmt.Sprintf("gen:%d", i), Source: "gen", Row: int64(i),
					Messages: []record.Message{
						{Role: record.RoleUser, Content: strings.Join(ws, " ")},
						{Role: record.RoleAssistant, Calls: []record.Call{{Name: "lookup_" + vocab[r.IntN(len(vocab))],
							Arguments: json.RawMessage(fmt.Sprintf(`{"alpha":%q,"beta":%d,"gamma":%q}`, vocab[r.IntN(len(vocab))], r.IntN(100000), vocab[r.IntN(len(vocab))]))}}},
						{Role: record.RoleTool, Results: []record.Result{{Name: "lookup", Content: `{"ok":true}`}}},
						{Role: record.RoleAssistant, Content: "Done."},
					}}
				if len(recent) < 1000 {
					recent = append(recent, rec)
				} else {
					recent[r.IntN(len(recent))] = rec
				}
			}
			if err := yield(rec); err != nil {
				return err
			}
		}
		return nil
	}
}

// BenchmarkDedup plans and processes generated records (AUGMENT_DEDUP_N,
// default 1,000,000) and reports records/s over both, records per CPU-second
// with and without the generator's share (it generates the records twice),
// the live heap per record at Plan's peak (signatures, hashes, IDs, sort
// entries), and the removed and planted counts.
func BenchmarkDedup(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("AUGMENT_DEDUP_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	for b.Loop() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		var peak uint64
		dedupPeakHook = func() {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = ms.HeapAlloc - base
		}
		// The generator's own CPU time, to tell the stage's apart.
		g0 := cputime.Process()
		dedupStream(n, nil, nil)(func(*record.Record) error { return nil })
		gen := cputime.Process() - g0
		d := buildDedup(b, DedupConfig{}, 1)
		start, cpu0 := time.Now(), cputime.Process()
		planted := 0
		if _, err := d.Plan(context.Background(), dedupStream(n, &planted, nil)); err != nil {
			b.Fatal(err)
		}
		dedupPeakHook = nil
		// Process; afterwards (past the peak) the planted pairs are
		// checked: found when one member is removed as a duplicate of the
		// other; any other removal is a false positive.
		removed := map[string]string{}
		pairs := map[string]string{}
		err := dedupStream(n, nil, func(c, o string) { pairs[c] = o })(func(r *record.Record) error {
			var rj *contract.Reject
			if _, err := d.Process(context.Background(), r); errors.As(err, &rj) {
				keeper, _, _ := strings.Cut(strings.TrimPrefix(rj.Detail, "duplicate_of="), " ")
				removed[r.ID] = keeper
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		elapsed, cpu := time.Since(start), cputime.Process()-cpu0
		found := 0
		for c, o := range pairs {
			if removed[c] == o || removed[o] == c {
				found++
			}
		}
		b.ReportMetric(float64(found)/float64(len(pairs)), "recall")
		b.ReportMetric(float64(len(removed)-found), "false-positives")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
		b.ReportMetric(float64(n)/cpu.Seconds(), "records/cpu-s")
		b.ReportMetric(float64(n)/(cpu-2*gen).Seconds(), "records/cpu-s-stage")
		b.ReportMetric(float64(peak)/float64(n), "peak-bytes/record")
		b.ReportMetric(float64(planted), "planted")
	}
}

// FuzzCallText: the fast argument reader writes what encoding/json's path
// writes, for any bytes, in callText's form and in callKey's.
func FuzzCallText(f *testing.F) {
	for _, s := range []string{`{"b":{"y":1,"x":[true,null]},"a":"v"}`, `{"a":"\u00e9\n","a":2}`, `[1, -2.5e3, "x"]`, `{"a":01}`, `{"a":"` + "\xff" + `"}`, `"s" x`, ` {} `, `{"k": [[[]]], "j": {}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		c := record.Call{Name: "f", Arguments: args}
		if fast, slow := callText(c), callTextSlow(c); fast != slow {
			t.Fatalf("%q: fast %q, slow %q", args, fast, slow)
		}
		if fast, slow := callKey(c), callKeySlow(c); fast != slow {
			t.Fatalf("%q: key fast %q, slow %q", args, fast, slow)
		}
	})
}

// TestDedupRealReencoded: the shared data holds LLaMA-Factory's glaive demo
// dialogues re-encoded as raw glaive and as raw ToolACE rows. Across the two
// readers every glaive-format record is an exact duplicate of its ToolACE
// twin (kept, as preferred); within one source the demo's own repeats are
// found, as many in each encoding.
func TestDedupRealReencoded(t *testing.T) {
	for _, lang := range []string{"en", "zh"} {
		toolace, glaive := "toolace_format_glaive_toolcall_"+lang+"_demo", "glaive_v2_format_glaive_toolcall_"+lang+"_demo"
		recs := sharedRecords(t, 590, dump{"derived/" + toolace + ".json", "toolace"}, dump{"derived/" + glaive + ".json", "glaive"})
		across, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact, Prefer: []string{toolace}}, 1), recs)
		within, _ := dedupRun(t, buildDedup(t, DedupConfig{Mode: DedupExact, Scope: ScopeWithin}, 1), recs)
		perSource := map[string]int{}
		for _, r := range recs {
			if r.Source == glaive && !strings.HasPrefix(across[r.ID], toolace+":") {
				t.Errorf("%s: kept or kept the wrong twin: %q", r.ID, across[r.ID])
			}
			if k, ok := within[r.ID]; ok {
				if !strings.HasPrefix(k, r.Source+":") {
					t.Errorf("scope within: %s duplicate of %s", r.ID, k)
				}
				perSource[r.Source]++
			}
		}
		if perSource[toolace] == 0 || perSource[toolace] != perSource[glaive] {
			t.Errorf("%s: repeats within each encoding %v, want equal and some", lang, perSource)
		}
	}
}

// TestSortBuckets: the radix sort orders by group then key and keeps the
// position order of equal entries, as a stable comparison sort does.
func TestSortBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{0, 1, 2, 100, 5000} {
		entries := make([]bucketEntry, n)
		for i := range entries {
			// Few distinct keys and groups, so equal entries are common;
			// keys differing only in high digits test every pass.
			entries[i] = bucketEntry{key: uint64(r.IntN(4)) << (16 * uint(r.IntN(4))), grp: uint16(r.IntN(3)), pos: uint32(i)}
		}
		want := slices.Clone(entries)
		slices.SortStableFunc(want, func(a, b bucketEntry) int {
			if a.grp != b.grp {
				return int(a.grp) - int(b.grp)
			}
			if a.key != b.key {
				if a.key < b.key {
					return -1
				}
				return 1
			}
			return 0
		})
		sortBuckets(entries, make([]bucketEntry, n))
		if !slices.Equal(entries, want) {
			t.Errorf("n=%d: radix order differs", n)
		}
	}
}
