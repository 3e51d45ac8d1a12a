package report

import (
	"encoding/json"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func TestPercentiles(t *testing.T) {
	tests := []struct {
		in   []int
		want Percentiles
	}{
		{nil, Percentiles{}},
		{[]int{7}, Percentiles{Count: 1, Min: 7, P50: 7, P90: 7, P99: 7, Max: 7, Sum: 7}},
		{[]int{4, 1, 3, 2}, Percentiles{Count: 4, Min: 1, P50: 2, P90: 4, P99: 4, Max: 4, Sum: 10}},
		// Repeated values: ranks count each occurrence.
		{[]int{9, 5, 1, 9, 5, 9}, Percentiles{Count: 6, Min: 1, P50: 5, P90: 9, P99: 9, Max: 9, Sum: 38}},
		// 1..100: nearest rank.
		{seq(1, 100), Percentiles{Count: 100, Min: 1, P50: 50, P90: 90, P99: 99, Max: 100, Sum: 5050}},
	}
	for _, tt := range tests {
		h := IntHist{}
		for _, v := range tt.in {
			h[v]++
		}
		if got := percentilesOf(h); got != tt.want {
			t.Errorf("percentiles(%v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func TestSizeCategory(t *testing.T) {
	for n, want := range map[int64]string{0: "n<1K", 999: "n<1K", 1000: "1K<n<10K", 60000: "10K<n<100K", 200000: "100K<n<1M", 5e6: "1M<n<10M"} {
		if got := sizeCategory(n); got != want {
			t.Errorf("sizeCategory(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestLang(t *testing.T) {
	user := func(s string) *record.Record {
		return &record.Record{Messages: []record.Message{{Role: record.RoleUser, Content: s}, {Role: record.RoleAssistant, Content: "好的"}}}
	}
	tagged := user("hello")
	tagged.SetTag("lang", "zh-TW")
	tests := []struct {
		r    *record.Record
		want string
	}{
		{tagged, "zh-TW"},
		{user("What's the weather in Paris?"), "en"},
		{user("Ça coûte combien ?"), "en"}, // Latin script: counted as en (documented)
		// Untagged Chinese: ingest's tag counts the answers too, and a
		// question answered with code or LaTeX gets none.
		{user("今天天氣如何？"), "zh"},
		{user("在我正在处理的文档中，在LaTeX中我该如何实现这一点？"), "zh"},
		{user("Ruby代码实现冒泡排序算法的代码是什么？"), "zh"},
		{user("Ωμέγα"), "und"},
		{user("12345"), "und"},
	}
	for _, tt := range tests {
		if got := Lang(tt.r); got != tt.want {
			t.Errorf("Lang(%q) = %s, want %s", tt.r.Messages[0].Content, got, tt.want)
		}
	}
	if hubLanguage("zh-TW") != "zh" || hubLanguage("en") != "en" {
		t.Error("hubLanguage")
	}
}

// TestLetters holds letters (ASCII byte by byte, the rest decoded) to the
// rune-by-rune rule it stands for, on texts with invalid UTF-8, control
// bytes, DEL, ASCII neighbours of letters and non-Latin letters.
func TestLetters(t *testing.T) {
	ref := func(s string) (latin, other int) {
		for _, c := range s {
			switch {
			case c < unicode.MaxASCII && unicode.IsLetter(c), unicode.Is(unicode.Latin, c):
				latin++
			case unicode.IsLetter(c):
				other++
			}
		}
		return latin, other
	}
	parts := []string{"abcd", "Z", "@[`{", "\x7f", "\xff\xfe", "é", "ß", "ǅ", "你", "好", "Ω", "١٢", " ", "\n", "_", "\xe4\xbd"}
	for i := range 4000 {
		var b strings.Builder
		for k, x := 0, i; k < 6; k, x = k+1, x*7+3 {
			b.WriteString(parts[x%len(parts)])
		}
		s := b.String()
		gotLatin, gotOther, _ := letters(s)
		wl, wo := ref(s)
		if gotLatin != wl || gotOther != wo {
			t.Fatalf("letters(%q) = %d, %d; want %d, %d", s, gotLatin, gotOther, wl, wo)
		}
	}
}

func TestIDHashIsMixedFNV(t *testing.T) {
	for _, id := range []string{"", "a", "glaive:000123", "记录-7"} {
		h := fnv.New64a()
		h.Write([]byte(id))
		if got := idHash(id); got != near.Mix(h.Sum64()) {
			t.Errorf("idHash(%q) = %x, want FNV-64a mixed %x", id, got, near.Mix(h.Sum64()))
		}
	}
}

// TestTokenSampleUniform: the token sample of sequential IDs (a dump's
// rows, "glaive:0" …) takes about as many records from each tenth and each
// hundredth of the rows, and no long run of consecutive rows. FNV-64a
// without a finaliser took 100 to 1100 per tenth of 40,000 rows (500
// expected), in runs of consecutive rows.
func TestTokenSampleUniform(t *testing.T) {
	for _, prefix := range []string{"glaive:", "u:", "xlam-60k:"} {
		const rows = 40_000
		below := SampleBelow(rows) // about 5000 records: 1/8
		var tenth [10]int
		var hundredth [100]int
		run, longest := 0, 0
		for i := range rows {
			if !inSample(idHash(prefix+strconv.Itoa(i)), below) {
				run = 0
				continue
			}
			tenth[i*10/rows]++
			hundredth[i*100/rows]++
			run++
			longest = max(longest, run)
		}
		// Binomial(4000, 1/8): 500 ± 21 per tenth; (400, 1/8): 50 ± 6.6
		// per hundredth. The bounds are 5 standard deviations and more.
		for i, n := range tenth {
			if n < 400 || n > 600 {
				t.Errorf("%s: tenth %d of the rows has %d records in the sample, want 400..600 (%v)", prefix, i, n, tenth)
			}
		}
		for i, n := range hundredth {
			if n < 15 || n > 85 {
				t.Errorf("%s: hundredth %d of the rows has %d records in the sample, want 15..85", prefix, i, n)
			}
		}
		// P(a run of 10 somewhere) ≈ 40000 · 8^-10 < 1e-4.
		if longest >= 10 {
			t.Errorf("%s: %d consecutive rows all in the sample", prefix, longest)
		}
	}
}

func TestIntBars(t *testing.T) {
	b := intBars(IntHist{1: 2, 3: 1})
	if len(b) != 3 || b[1].Label != "2" || b[1].Value != 0 || b[2].Value != 1 {
		t.Errorf("gaps are empty bars: %+v", b)
	}
	// A wide range is binned; every value is counted once.
	h := IntHist{}
	for _, v := range []int{10, 500, 501, 999, 4000} {
		h[v]++
	}
	var total float64
	bars := intBars(h)
	for _, x := range bars {
		total += x.Value
	}
	if total != 5 || len(bars) > 24 || bars[len(bars)-1].Value == 0 {
		t.Errorf("binned: total %v, %d bins: %+v", total, len(bars), bars)
	}
}

func msg(role, content string, calls ...string) record.Message {
	m := record.Message{Role: role, Content: content}
	for _, c := range calls {
		m.Calls = append(m.Calls, record.Call{Name: c, Arguments: json.RawMessage(`{}`)})
	}
	return m
}

func TestDiff(t *testing.T) {
	a := &record.Record{
		Tools:    []record.Tool{{Name: "f", Parameters: json.RawMessage(`{}`)}, {Name: "g", Parameters: json.RawMessage(`{}`)}},
		Messages: []record.Message{msg("user", "hi"), msg("assistant", "", "f"), msg("assistant", "done")},
		Tags:     []record.Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}},
		Lineage:  []record.Step{{Stage: "ingest", Provider: "rule"}},
	}
	b := a.Clone()
	b.Tools = []record.Tool{a.Tools[0], {Name: "meta_tool", Parameters: json.RawMessage(`{}`)}}
	b.Messages = []record.Message{msg("user", "hi"), msg("assistant", "", "meta_tool"), msg("tool", ""), msg("assistant", "", "f"), msg("assistant", "done!")}
	b.Messages[2].Results = []record.Result{{Name: "meta_tool", Content: "ok"}}
	b.SetTag("b", "3")
	b.SetTag("c", "4")
	b.Tags = slices.DeleteFunc(b.Tags, func(t record.Tag) bool { return t.Key == "a" })
	b.AddStep("meta_tool", "rule", "")
	got := Diff(a, b)
	want := []string{
		"+ tool meta_tool",
		"- tool g",
		`+ turn 1 assistant: calls meta_tool{}`,
		`+ turn 2 tool: results meta_tool → ok`,
		`~ turn 4 assistant: content "done!"`,
		"~ tag b=3 (was 2)",
		"+ tag c=4",
		"- tag a=1",
		"+ lineage meta_tool (rule)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n%q\nwant\n%q", got, want)
	}
	if d := Diff(a, a.Clone()); len(d) != 0 {
		t.Errorf("no change: %q", d)
	}
}

func TestJudgeBars(t *testing.T) {
	counters := map[string]int64{
		"check.judge_completeness":             4,
		"judge.judge_completeness=0":           1,
		"judge.judge_completeness=2":           7,
		"judge.judge_completeness=unparseable": 3,
		"judge.judge_hallucination=1":          2,
		"judge.judge_hallucination=0":          5,
	}
	type bin struct {
		label string
		n     float64
	}
	for _, tc := range []struct {
		judge string
		want  []bin // nil: no chart
	}{
		{"judge_completeness", []bin{{"0", 1}, {"1", 0}, {"2", 7}, {"unparseable", 3}}},
		{"judge_hallucination", []bin{{"0", 5}, {"1", 2}}},
		{"judge_correctness", nil}, // configured but no counters (an older manifest)
		{"roles", nil},             // a rule check
	} {
		t.Run(tc.judge, func(t *testing.T) {
			var got []bin
			for _, b := range judgeBars(tc.judge, counters) {
				got = append(got, bin{b.Label, b.Value})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMergeSampleThresholds: parts counted with different token-sample
// thresholds (a resumed run whose ingest handed on another number of
// records) merge into the sample of the smallest, in any order.
func TestMergeSampleThresholds(t *testing.T) {
	part := func(below uint64, from, to int) *Dist {
		d := newDist()
		d.sampleBelow = below
		for i := from; i < to; i++ {
			d.add(&record.Record{ID: "r" + strconv.Itoa(i), Source: "s",
				Messages: []record.Message{{Role: record.RoleUser, Content: strings.Repeat("word ", i%7+1)}}})
		}
		return d
	}
	wide, narrow := SampleBelow(10000), SampleBelow(40000) // about 1/2 and 1/8 of the records
	a, b := part(wide, 0, 1000), part(narrow, 1000, 2000)
	want, wideN := 0, 0
	for i := range 2000 {
		h := idHash("r" + strconv.Itoa(i))
		if h < narrow {
			want++
		}
		if h < wide {
			wideN++
		}
	}
	if want == 0 || want >= wideN {
		t.Fatalf("%d records below the narrow threshold, %d below the wide one: the test needs both", want, wideN)
	}
	for _, order := range [][]*Dist{{a, b}, {b, a}} {
		d := newDist()
		for _, p := range order {
			d.merge(p)
		}
		d.finish()
		if d.Records != 2000 || d.Tokens.Count != int64(want) {
			t.Errorf("%d records, %d counted; want 2000 and the %d below the narrower threshold", d.Records, d.Tokens.Count, want)
		}
	}
}

// TestPartialNarrow counts a partial for fewer rows than the run's (a
// larger sample), narrows it to the run's rows and checks that it writes
// the bytes of the partial counted for the run's rows from the start.
func TestPartialNarrow(t *testing.T) {
	recs := make([]*record.Record, 3000)
	for i := range recs {
		recs[i] = &record.Record{ID: "src:" + strconv.Itoa(i), Source: "src", Messages: []record.Message{
			{Role: record.RoleUser, Content: strings.Repeat("word ", i%50+1)}, {Role: record.RoleAssistant, Content: "ok"}}}
	}
	// write counts recs in p, narrows it to rows (as the runner does at
	// commit) and returns the file p writes.
	write := func(p *Partial, rows int64) string {
		for _, r := range recs[:2000] {
			p.AddWritten(r)
		}
		for _, r := range recs[2000:] {
			p.AddRejected(r)
		}
		p.Narrow(rows)
		dir := t.TempDir()
		root, err := atomicfs.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if _, err := p.Write(root, "p.json"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "p.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var memo verify.TokenMemo
	want := write(NewPartial(200_000, &memo), 200_000)
	for _, early := range []int64{0, 6000, 150_000, 200_000} {
		if got := write(NewPartial(early, &memo), 200_000); got != want {
			t.Errorf("counted for %d rows and narrowed to 200000: the file differs from the one counted for 200000", early)
		}
	}
	// A partial counted for more rows than the run's keeps its smaller sample.
	p := NewPartial(400_000, &memo)
	p.Narrow(200_000)
	if p.written.sampleBelow != SampleBelow(400_000) {
		t.Errorf("narrowed to more rows: threshold %d, want %d (kept)", p.written.sampleBelow, SampleBelow(400_000))
	}
}
