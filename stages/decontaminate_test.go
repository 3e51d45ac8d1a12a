package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
	"golang.org/x/text/unicode/norm"
)

func TestReadBenchmark(t *testing.T) {
	for _, tc := range []struct {
		name, format, in string
		want             string // items as id=turn|turn;…
		err              string
	}{
		{"bfcl turns", BenchBFCL,
			`{"id": "simple_0", "question": [{"role": "user", "content": "Find the area of a triangle."}], "function": []}`,
			"simple_0=Find the area of a triangle.", ""},
		{"bfcl turn lists, system and assistant left out", BenchBFCL,
			`{"id": "multi_turn_base_1", "question": [[{"role": "system", "content": "S"}, {"role": "user", "content": "A"}], [{"role": "user", "content": "B"}]]}`,
			"multi_turn_base_1=A|B", ""},
		{"bfcl string question, numeric id, blank lines", BenchBFCL,
			"\n{\"id\": 7, \"question\": \"Q?\"}\n\n{\"question\": \"R\"}\n",
			"7=Q?;b:4=R", ""},
		{"bfcl bad json names the line", BenchBFCL, "{\"id\":\"a\",\"question\":\"x\"}\n{oops", "", "line 2"},
		{"bfcl no question", BenchBFCL, `{"id": "a"}`, "", `line 1: no "question"`},
		{"bfcl question of numbers", BenchBFCL, `{"id": "a", "question": [1]}`, "", "line 1: question"},
		{"bfcl too deep", BenchBFCL, `{"id": "a", "question": [[[["x"]]]]}`, "", "deeper"},
		{"text", BenchText, "first line\n\n  second line  \n", "b:1=first line;b:3=second line", ""},
		// A UTF-8 byte order mark starts files written on Windows.
		{"bfcl with a byte order mark", BenchBFCL,
			"\xEF\xBB\xBF{\"id\": \"simple_0\", \"question\": [[{\"role\": \"user\", \"content\": \"What is the weather like in Paris today?\"}]]}\n",
			"simple_0=What is the weather like in Paris today?", ""},
		{"text with a byte order mark", BenchText, "\xEF\xBB\xBFfirst\nsecond\n", "b:1=first;b:2=second", ""},
		{"a byte order mark inside is no mark", BenchBFCL, "{\"id\": 1, \"question\": \"Q\"}\n\xEF\xBB\xBF{\"id\": 2, \"question\": \"R\"}\n", "", "line 2"},
		{"sharegpt parallel calls are one turn", BenchShareGPT,
			`{"conversations": [{"from": "human", "value": "Weather and time?"}, {"from": "function_call", "value": "[{\"name\": \"w\", \"arguments\": {}}, {\"name\": \"t\", \"arguments\": {}}]"}, {"from": "observation", "value": "[{}, {}]"}, {"from": "gpt", "value": "ok"}, {"from": "human", "value": "Again"}, {"from": "function_call", "value": "{\"name\": \"t\", \"arguments\": {}}"}, {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "ok"}], "tools": "[{\"name\": \"w\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}, {\"name\": \"t\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}]"}`,
			"b:0=Weather and time?|Again+w+t;+t", ""},
		{"sharegpt", BenchShareGPT,
			`{"conversations": [{"from": "human", "value": "Weather in Paris?"}, {"from": "function_call", "value": "{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}"}, {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "Sunny."}], "tools": "[{\"name\": \"w\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}]"}`,
			"b:0=Weather in Paris?+w", ""},
		{"openai bad row", BenchOpenAI, `[{"messages": 3}]`, "", "item 0"},
		// A row the reader rejects is compared by its user turns; rows
		// without any are all named at once.
		{"sharegpt rejected row keeps its user turns", BenchShareGPT,
			`[{"conversations": [{"from": "human", "value": "Weather?"}, {"from": "observation", "value": "{}"}, {"from": "gpt", "value": "x"}]}, ` +
				`{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"}]}]`,
			"b:0=Weather?;b:1=Hi", ""},
		{"openai undeclared call keeps its user turns", BenchOpenAI,
			`{"messages": [{"role": "user", "content": "Book it"}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "book", "arguments": "{}"}}]}]}`,
			"b:0=Book it", ""},
		{"every row without user turns is named", BenchShareGPT,
			`[{"conversations": 3}, {"conversations": [{"from": "human", "value": 5}]}]`, "", "2 unreadable item(s), with no user turn to compare: item 0: "},
		{"unknown format", "csv", "a", "", "not one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, _, err := readBenchmark(strings.NewReader(tc.in), "b", tc.format)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				s := it.ID + "=" + strings.Join(it.User, "|")
				for i, turn := range it.Calls {
					if i > 0 {
						s += ";"
					}
					for _, c := range turn {
						s += "+" + c.Name
					}
				}
				got = append(got, s)
			}
			if g := strings.Join(got, ";"); g != tc.want {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
	}
}

// FuzzReadBenchmark: the readers never panic, and what they accept reads
// the same twice, every item with an ID.
func FuzzReadBenchmark(f *testing.F) {
	f.Add([]byte(`{"id": "simple_0", "question": [[{"role": "user", "content": "x"}]]}`), uint8(0))
	f.Add([]byte("line one\nline two\n"), uint8(3))
	f.Add([]byte(`[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]`), uint8(1))
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}]}`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		format := benchFormats[int(k)%len(benchFormats)]
		a, _, err := readBenchmark(bytes.NewReader(data), "b", format)
		if err != nil {
			return
		}
		b, _, err := readBenchmark(bytes.NewReader(data), "b", format)
		if err != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("second read differs: %v", err)
		}
		for _, it := range a {
			if it.ID == "" {
				t.Fatal("item without ID")
			}
		}
	})
}

func bfclLine(id, question string) string {
	b, _ := json.Marshal(map[string]any{"id": id, "question": [][]map[string]string{{{"role": "user", "content": question}}}, "function": []any{}})
	return string(b)
}

// leakSet is distinct records with planted leaks of a benchmark, and the
// benchmark: a BFCL file of long questions and a text file of short ones.
// want maps each leaking record to the item it leaks.
func leakSet(t *testing.T, n int) (recs []*record.Record, dir string, want map[string]string) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := range n {
		recs = append(recs, synthRecord(r, "src", i))
	}
	sentence := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = synthWord(r)
		}
		return strings.Join(ws, " ")
	}
	want = map[string]string{}
	var bfcl, text []string
	for i := range 300 {
		q := strings.ToUpper(sentence(20)[:1]) + sentence(20)[1:] + "?"
		bfcl = append(bfcl, bfclLine(fmt.Sprintf("simple_%d", i), q))
		short := sentence(6)
		text = append(text, short)
		if i%10 != 0 {
			continue
		}
		// Leaks: the question inside a longer query, lowercased without
		// punctuation; a record that is the short item exactly.
		long := recs[i].Clone()
		long.Messages[0].Content = "Hello there. " + strings.ToLower(strings.TrimSuffix(q, "?")) + " thanks a lot"
		want[long.ID] = fmt.Sprintf("simple_%d", i)
		recs[i] = long
		exact := recs[i+1].Clone()
		exact.Messages[0].Content = strings.ToUpper(short) + "!"
		want[exact.ID] = fmt.Sprintf("text:%d", i+1)
		recs[i+1] = exact
	}
	// Near misses that must not hit: 12 words of a question (no 13-gram),
	// and a short item inside a longer query (not exact).
	miss := recs[n-1].Clone()
	var q struct {
		Question [][]map[string]string `json:"question"`
	}
	json.Unmarshal([]byte(bfcl[5]), &q)
	miss.Messages[0].Content = strings.Join(strings.Fields(q.Question[0][0]["content"])[:12], " ")
	recs[n-1] = miss
	miss2 := recs[n-2].Clone()
	miss2.Messages[0].Content = "Please " + text[7] + " now"
	recs[n-2] = miss2

	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "bfcl.json"), []byte(strings.Join(bfcl, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "short.txt"), []byte(strings.Join(text, "\n")+"\n"), 0o644)
	return recs, dir, want
}

func buildDecon(t testing.TB, cfg DecontaminateConfig, dir string) *benchIndex {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatal(probs)
	}
	st, err := cfg.build(&Env{Stage: "decontaminate", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st.(*benchIndex)
}

func deconRun(t testing.TB, ix *benchIndex, recs []*record.Record) map[string][]benchHit {
	t.Helper()
	got := map[string][]benchHit{}
	for _, r := range recs {
		_, err := ix.Process(context.Background(), r)
		var rj *contract.Reject
		if errors.As(err, &rj) {
			var hits []benchHit
			if err := json.Unmarshal([]byte(rj.Detail), &hits); err != nil {
				t.Fatalf("%s: detail %q: %v", r.ID, rj.Detail, err)
			}
			got[r.ID] = hits
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestDecontaminatePlanted: every planted leak is found with the item it
// leaks, near misses and distinct records are not (precision and recall 1).
func TestDecontaminatePlanted(t *testing.T) {
	recs, dir, want := leakSet(t, 2000)
	ix := buildDecon(t, DecontaminateConfig{Benchmarks: []BenchmarkFile{
		{Name: "bfcl", Path: "bfcl.json", Format: BenchBFCL}, {Name: "text", Path: "short.txt", Format: BenchText}}}, dir)
	got := deconRun(t, ix, recs)
	for _, r := range recs {
		item, ok := want[r.ID]
		if !ok {
			continue
		}
		hits := got[r.ID]
		if len(hits) != 1 || hits[0].Item != item {
			t.Errorf("%s: hits %+v, want %s", r.ID, hits, item)
			continue
		}
		// An n-gram hit names the record's first n-gram the item holds.
		if h := hits[0]; h.Kind == "ngram" && (len(strings.Fields(h.NGram)) != 13 || !strings.Contains(near.Normalize(r.Messages[0].Content), h.NGram)) {
			t.Errorf("%s: n-gram %q is not 13 words of %q", r.ID, h.NGram, r.Messages[0].Content)
		}
	}
	for id, hits := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: not a leak, hits %+v", id, hits)
		}
	}
	if len(want) != 60 {
		t.Fatalf("planted %d leaks", len(want))
	}
}

func TestDecontaminateThresholdAndCalls(t *testing.T) {
	dir := t.TempDir()
	q := "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
	os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(bfclLine("x", q)+"\n"), 0o644)
	chat := `{"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]}], "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}]}`
	os.WriteFile(filepath.Join(dir, "o.jsonl"), []byte(chat+"\n"), 0o644)
	rec := func(id, user string, args string) *record.Record {
		r := &record.Record{ID: id, Messages: []record.Message{{Role: record.RoleUser, Content: user}}}
		if args != "" {
			r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Calls: []record.Call{{Name: "w", Arguments: json.RawMessage(args)}}})
		}
		return r
	}
	recs := []*record.Record{
		rec("first13", "one two three four five six seven eight nine ten eleven twelve thirteen", ""), // 1 of 4 n-grams
		rec("all", q, ""),
		rec("same-call-reordered", "weather in paris", `{"unit": "c", "city": "Paris"}`),
		rec("other-call", "Weather in Paris?", `{"city": "Lyon", "unit": "c"}`),
		rec("no-call", "Weather in Paris?", ""),
	}
	bench := []BenchmarkFile{{Name: "b", Path: "b.jsonl", Format: BenchBFCL}, {Name: "o", Path: "o.jsonl", Format: BenchOpenAI}}
	any1 := deconRun(t, buildDecon(t, DecontaminateConfig{Benchmarks: bench}, dir), recs)
	half := deconRun(t, buildDecon(t, DecontaminateConfig{Benchmarks: slices.Clone(bench), Threshold: 0.5}, dir), recs)
	keys := func(m map[string][]benchHit) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }
	if k := keys(any1); k != "all,first13,same-call-reordered" {
		t.Errorf("threshold 0: hits %s", k)
	}
	if k := keys(half); k != "all,same-call-reordered" {
		t.Errorf("threshold 0.5: hits %s", k)
	}
	if h := any1["first13"]; len(h) != 1 || h[0].Shared != 1 || h[0].Of != 4 || h[0].Kind != "ngram" {
		t.Errorf("first13: %+v", h)
	}
	if h := any1["same-call-reordered"]; len(h) != 1 || h[0].Kind != "exact" || h[0].Item != "o:0" {
		t.Errorf("same-call-reordered: %+v", h)
	}
}

func TestDecontaminateConfig(t *testing.T) {
	c := DecontaminateConfig{Benchmarks: []BenchmarkFile{{Path: "x/bfcl_simple.json", Format: "bfcl"}, {Path: "y/bfcl_simple.json", Format: "xml"}}, NGram: -1, Threshold: 2}
	c.defaults()
	probs := strings.Join(c.validate(), "; ")
	for _, want := range []string{`format "xml"`, `name "bfcl_simple" is used twice`, "ngram", "threshold"} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems %q lack %q", probs, want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("hello world\n"), 0o644)
	c = DecontaminateConfig{Benchmarks: []BenchmarkFile{{Path: "b.txt", Format: "text"}}}
	c.defaults()
	if _, err := c.build(&Env{Dir: dir}); err != nil || c.Benchmarks[0].SHA256 == "" || c.Benchmarks[0].Items != 1 {
		t.Errorf("build: %v, sha %q, items %d", err, c.Benchmarks[0].SHA256, c.Benchmarks[0].Items)
	}
	c.Benchmarks[0].Path = "missing.txt"
	// The runner puts `stage "NAME":` in front; the error names the
	// benchmark, not the stage type again.
	if _, err := c.build(&Env{Dir: dir}); err == nil || !strings.HasPrefix(err.Error(), "benchmark ") || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a missing benchmark file must fail the build, naming it: %v", err)
	}
}

// BenchmarkDecontaminate checks generated records against a generated
// 10,000-item BFCL file, on one goroutine (the runner spreads records over
// the CPUs).
func BenchmarkDecontaminate(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var lines []string
	for i := range 10000 {
		ws := make([]string, 15+r.IntN(30))
		for j := range ws {
			ws[j] = synthWord(r)
		}
		lines = append(lines, bfclLine(fmt.Sprintf("simple_%d", i), strings.Join(ws, " ")))
	}
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "bfcl.json"), []byte(strings.Join(lines, "\n")), 0o644)
	ix := buildDecon(b, DecontaminateConfig{Benchmarks: []BenchmarkFile{{Name: "bfcl", Path: "bfcl.json", Format: BenchBFCL}}}, dir)
	const n = 100_000
	var recs []*record.Record
	dedupStream(n, nil, nil)(func(r *record.Record) error { recs = append(recs, r); return nil })
	b.ResetTimer()
	for b.Loop() {
		start, cpu0 := time.Now(), cputime.Process()
		for _, r := range recs {
			ix.Process(context.Background(), r)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64(n)/(cputime.Process()-cpu0).Seconds(), "records/cpu-s")
	}
}

// TestDecontaminateScripts: Chinese is compared in 20-character n-grams
// (a character is 2/3 of a word), Korean word by word, every text in NFKC:
// a shared greeting and request does not make two questions one, a copied
// question does, whatever its width, composition or punctuation.
func TestDecontaminateScripts(t *testing.T) {
	dir := t.TempDir()
	en := "Please book a table for four people at seven at the Italian café near the central station tonight"
	zh := "你能帮我找到最新的美国体育新闻和今天北京的天气预报吗？"
	bench := []string{
		"你好，我想请你帮我查一下今天美元兑人民币的汇率是多少？",
		"안녕하세요, 저는 오늘 서울의 날짜와 요일을 알고 싶어요.",
		en,
		zh,
		"東京から大阪までの新幹線の時刻表を教えてください。",
	}
	os.WriteFile(filepath.Join(dir, "t.txt"), []byte(strings.Join(bench, "\n")+"\n"), 0o644)
	fullWidth := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '\u3000'
			case '!' <= r && r <= '~':
				return r + 0xFEE0
			}
			return r
		}, s)
	}
	rec := func(id string, user ...string) *record.Record {
		r := &record.Record{ID: id}
		for _, u := range user {
			r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: u}, record.Message{Role: record.RoleAssistant, Content: "ok"})
		}
		return r
	}
	recs := []*record.Record{
		// 13 characters in common with item t:1, a greeting and a request.
		rec("zh-greeting", "你好，我想请你帮我查一下今天北京的天气怎么样？"),
		// 3 words in common with t:2 (안녕하세요 … 오늘 서울의).
		rec("ko-greeting", "안녕하세요, 저는 오늘 서울의 날씨를 알고 싶어요."),
		rec("ko-copy", "안녕하세요 저는 오늘 서울의 날짜와 요일을 알고 싶어요"),
		rec("zh-inside", "谢谢你的帮助！", strings.NewReplacer("，", ",", "？", "?").Replace(zh)+" 还有别的吗"),
		rec("zh-spaced", "请问 "+strings.Join(strings.Split(zh, ""), " ")),
		rec("zh-fullwidth-ascii", "Hi! "+strings.ReplaceAll(zh, "？", "?")),
		rec("ja-copy", "質問です。東京から大阪までの新幹線の時刻表を教えてください"),
		rec("en-nfd", norm.NFD.String(en)),
		rec("en-fullwidth", fullWidth(en)),
		rec("en-upper", strings.ToUpper(en)+"!!"),
		rec("en-12-words", strings.Join(strings.Fields(en)[:12], " ")),
	}
	got := deconRun(t, buildDecon(t, DecontaminateConfig{Benchmarks: []BenchmarkFile{{Name: "t", Path: "t.txt", Format: BenchText}}}, dir), recs)
	want := map[string]string{
		"ko-copy":            "t:2 exact",
		"zh-inside":          "t:4 ngram 你能帮我找到最新的美国体育新闻和今天北京",
		"zh-spaced":          "t:4 ngram 你能帮我找到最新的美国体育新闻和今天北京",
		"zh-fullwidth-ascii": "t:4 ngram 你能帮我找到最新的美国体育新闻和今天北京",
		"ja-copy":            "t:5 ngram 東京から大阪までの新幹線の時刻表を教えて",
		"en-nfd":             "t:3 ngram please book a table for four people at seven at the italian café",
		"en-fullwidth":       "t:3 ngram please book a table for four people at seven at the italian café",
		"en-upper":           "t:3 ngram please book a table for four people at seven at the italian café",
	}
	for _, r := range recs {
		var g []string
		for _, h := range got[r.ID] {
			g = append(g, strings.TrimSpace(h.Item+" "+h.Kind+" "+h.NGram))
		}
		if s := strings.Join(g, "; "); s != want[r.ID] {
			t.Errorf("%s: hits %q, want %q", r.ID, s, want[r.ID])
		}
	}
}

// TestDecontaminateParallelCalls: the exact rule reads the parallel calls
// of a turn in any order, as dedup does; the turns keep theirs.
func TestDecontaminateParallelCalls(t *testing.T) {
	dir := t.TempDir()
	tools := `[{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}, {"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]`
	call := func(name, args string) string {
		return fmt.Sprintf(`{"type": "function", "function": {"name": %q, "arguments": %q}}`, name, args)
	}
	w, tm := call("w", `{"city": "Paris", "unit": "c"}`), call("t", `{"city": "Paris"}`)
	item := `{"messages": [{"role": "user", "content": "Weather and time in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [` + w + `, ` + tm + `]}], "tools": ` + tools + `}`
	os.WriteFile(filepath.Join(dir, "o.jsonl"), []byte(item+"\n"), 0o644)
	rec := func(id string, turns ...[]record.Call) *record.Record {
		r := &record.Record{ID: id, Messages: []record.Message{{Role: record.RoleUser, Content: "Weather and time in Paris?"}}}
		for _, c := range turns {
			r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Calls: c})
		}
		return r
	}
	cw := record.Call{Name: "w", Arguments: json.RawMessage(`{"unit": "c", "city": "Paris"}`)}
	ct := record.Call{Name: "t", Arguments: json.RawMessage(`{"city": "Paris"}`)}
	cl := record.Call{Name: "t", Arguments: json.RawMessage(`{"city": "Lyon"}`)}
	recs := []*record.Record{
		rec("same", []record.Call{cw, ct}),
		rec("swapped", []record.Call{ct, cw}),
		rec("other-args", []record.Call{cl, cw}),
		rec("one-call", []record.Call{cw}),
	}
	got := deconRun(t, buildDecon(t, DecontaminateConfig{Benchmarks: []BenchmarkFile{{Name: "o", Path: "o.jsonl", Format: BenchOpenAI}}}, dir), recs)
	if k := strings.Join(slices.Sorted(maps.Keys(got)), ","); k != "same,swapped" {
		t.Errorf("hits %s, want same,swapped", k)
	}
}

// TestDecontaminateEmptyBenchmark: a benchmark without items stops the
// build (exit 2 in a run), naming the file, as a missing one does.
func TestDecontaminateEmptyBenchmark(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, format, data string }{
		{"empty.jsonl", BenchBFCL, ""},
		{"blank.txt", BenchText, "\xEF\xBB\xBF\n  \n\n"},
		{"none.json", BenchShareGPT, "[]"},
	} {
		os.WriteFile(filepath.Join(dir, tc.name), []byte(tc.data), 0o644)
		c := DecontaminateConfig{Benchmarks: []BenchmarkFile{{Path: tc.name, Format: tc.format}}}
		c.defaults()
		_, err := c.build(&Env{Dir: dir})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tc.name)) || !strings.Contains(err.Error(), "no item") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
