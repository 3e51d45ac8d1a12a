package verify

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/record"
)

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"软件信息网络", 3}, // measured in GO-DEPS.md §5 for o200k_base
	} {
		if got := Tokens(tt.text); got != tt.want {
			t.Errorf("Tokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
	// Special tokens count as text: more than the one special token.
	if n := Tokens("<|endoftext|>"); n < 2 {
		t.Errorf("special token text counted as %d token(s)", n)
	}
}

func TestTokensConcurrent(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸。", 20)
	want := Tokens(text)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got := Tokens(text); got != want {
					t.Errorf("got %d, want %d", got, want)
				}
			}
		})
	}
	wg.Wait()
}

func TestRecordTokens(t *testing.T) {
	r := twoTurns()
	n := RecordTokens(r)
	// Lower bound: the texts themselves.
	sum := 0
	for _, m := range r.Messages {
		sum += Tokens(m.Content)
		for _, c := range m.Calls {
			sum += Tokens(string(c.Arguments))
		}
		for _, res := range m.Results {
			sum += Tokens(res.Content)
		}
	}
	if n <= sum+len(r.Messages)*tokensPerMessage {
		t.Errorf("RecordTokens = %d, not above texts %d plus framing", n, sum)
	}
	// Adding a message adds its tokens and framing exactly.
	r2 := r.Clone()
	r2.Messages = append(r2.Messages, user("thanks a lot"))
	if got, want := RecordTokens(r2)-n, tokensPerMessage+Tokens("user")+Tokens("thanks a lot"); got != want {
		t.Errorf("one more message adds %d, want %d", got, want)
	}
	// Tools and system count; bad parameters JSON does not break counting.
	r3 := r.Clone()
	r3.System = "Be brief."
	r3.Tools = append(r3.Tools, record.Tool{Name: "bad", Parameters: json.RawMessage(`{oops`)})
	if RecordTokens(r3) <= n {
		t.Error("system prompt and tools not counted")
	}
	if got := RecordTokens(&record.Record{}); got != tokensReply {
		t.Errorf("empty record = %d", got)
	}
}

func BenchmarkTokens(b *testing.B) {
	text := strings.Repeat(`{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}} The weather in Paris is sunny. `, 10)
	Tokens(text) // load outside the timing
	b.SetBytes(int64(len(text)))
	cpu0 := cputime.Process()
	for b.Loop() {
		Tokens(text)
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func BenchmarkRecordTokens(b *testing.B) {
	r := twoTurns()
	RecordTokens(r)
	b.ResetTimer()
	for b.Loop() {
		RecordTokens(r)
	}
}

// tokenTexts are texts whose pre-tokenization has edges: contractions,
// case changes, digits, symbol runs with line breaks and slashes, marks,
// Chinese with and without punctuation, several kinds of white space.
var tokenTexts = []string{
	"The quick brown fox's tail, it'll be fine. I'd've said so!! 12345678 apples/pears\n\n  next line\r\n\tTabbed",
	"getWeatherByCity(\"Paris\", days=3) => {\"ok\": true, \"temps\": [12.5, -3, 1e9]}\n/* comment */ //x\n/path/to/file",
	"敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧！「引号」和《书名》……结束",
	"e\u0301te\u0301 cafe\u0301! n\u0303o — “quotes” ‘single’ it’s x'y 'quoted' ''",
	"a\u00a0b\u3000c\u2028d\u0085e\vf\fg   \n \n  h .\n/ x\n\n/y",
	strings.Repeat("word ", 50) + strings.Repeat("x", 300) + "." + strings.Repeat("9", 50) + "!" + strings.Repeat("!?", 40),
}

// TestTokensChunkedExact: counting in pieces cut by safeCut gives exactly
// the count of the whole text whenever no cut was forced.
func TestTokensChunkedExact(t *testing.T) {
	for _, text := range tokenTexts {
		whole, err := encoder().Count(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{8, 16, 33, 64, 200} {
			n, forced := countChunked(text, size, libraryCount)
			if !forced && n != whole {
				t.Errorf("size %d: %d tokens in pieces, %d whole, for %.40q", size, n, whole, text)
			}
			if forced && (n < whole-len(text)/size-1 || n > whole+len(text)/size+1) {
				t.Errorf("size %d, forced: %d tokens in pieces, %d whole: more than a token per cut", size, n, whole)
			}
		}
		if n, forced := countChunked(text, 16, libraryCount); !forced && n != Tokens(text) {
			t.Errorf("Tokens differs from the whole count for %.40q", text)
		}
	}
	if _, forced := countChunked(strings.Repeat("ab cd, ", 1000), 64, libraryCount); forced {
		t.Error("ordinary text needed a forced cut")
	}
}

// FuzzTokensChunked: for any text, pieces without a forced cut count the
// same as the whole.
func FuzzTokensChunked(f *testing.F) {
	for _, s := range tokenTexts {
		f.Add(s, uint8(16))
	}
	f.Fuzz(func(t *testing.T, text string, size uint8) {
		sz := int(size%64) + 4
		whole, err := encoder().Count(text)
		if err != nil {
			t.Skip()
		}
		if n, forced := countChunked(text, sz, libraryCount); !forced && n != whole {
			t.Fatalf("size %d: %d tokens in pieces, %d whole", sz, n, whole)
		}
	})
}

// BenchmarkTokensLong: time per byte stays flat as a text grows, also for a
// run of one repeated character (a 50 MB row was quadratic).
func BenchmarkTokensLong(b *testing.B) {
	Tokens("warm up")
	for _, kind := range []struct{ name, unit string }{{"repeated", "a"}, {"prose", "The weather in Paris is sunny, 21 degrees. "}, {"chinese", "今天天气很好，我们去公园。"}} {
		for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
			text := strings.Repeat(kind.unit, size/len(kind.unit))
			b.Run(fmt.Sprintf("%s/%dKiB", kind.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					Tokens(text)
				}
			})
		}
	}
}

// TestTokenMemoCountsAsTokens: a memo's counts are Tokens' and
// RecordTokens', remembered or not (long texts, a spent budget, nil).
func TestTokenMemoCountsAsTokens(t *testing.T) {
	texts := []string{"", "hello world", `{"name": "get_weather", "arguments": {"city": "Paris"}}`,
		"来确保存储在区块链上", strings.Repeat("ab ", memoTextMax/2)}
	var memo TokenMemo
	var none *TokenMemo
	for round := 0; round < 2; round++ {
		for _, s := range texts {
			if got, want := memo.Tokens(s), Tokens(s); got != want {
				t.Fatalf("round %d: memo.Tokens(%.20q) = %d, Tokens = %d", round, s, got, want)
			}
			if got, want := none.Tokens(s), Tokens(s); got != want {
				t.Fatalf("nil memo: %d, want %d", got, want)
			}
		}
	}
	if len(memo.texts) != len(texts)-2 {
		t.Fatalf("memo holds %d texts, want %d (the long one and the empty one are not kept)", len(memo.texts), len(texts)-2)
	}
	r := &record.Record{System: "You call tools.", Tools: []record.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`)}},
		Messages: []record.Message{{Role: record.RoleUser, Content: "hi"}, {Role: record.RoleAssistant, Calls: []record.Call{{Name: "f", Arguments: []byte(`{"a":1}`)}}}}}
	for range 2 {
		if got, want := memo.RecordTokens(r), RecordTokens(r); got != want {
			t.Fatalf("memo.RecordTokens = %d, RecordTokens = %d", got, want)
		}
	}
	full := TokenMemo{used: memoBudget}
	if full.Tokens("new text") != Tokens("new text") || len(full.texts) != 0 {
		t.Fatal("a memo whose budget is spent must count without keeping")
	}
	if none.RecordTokens(r) != RecordTokens(r) {
		t.Fatal("nil memo: RecordTokens differs")
	}
}

// TestTokenMemoSystems: records sharing a system prompt and tools share
// one remembered count; a change in any field systemText writes (or a
// tool more or less, or a response schema, which the export writes into
// the tools: QA F8) counts anew; a hash shared with another text or tool list (made here by
// hand) does not give the other's count.
func TestTokenMemoSystems(t *testing.T) {
	base := &record.Record{System: "You call tools.", Tools: []record.Tool{
		{Name: "get_weather", Description: "Weather of a city", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		{Name: "book", Description: "Book a table", Parameters: []byte(`{"type":"object"}`)}},
		Messages: []record.Message{{Role: record.RoleUser, Content: "hi"}}}
	variants := []func(r *record.Record){
		func(r *record.Record) {},
		func(r *record.Record) { r.System = "" },
		func(r *record.Record) { r.System = "You call tools, politely." },
		func(r *record.Record) { r.Tools[0].Name = "get_weather_now" },
		func(r *record.Record) { r.Tools[1].Description = "Book a table for two or more people" },
		func(r *record.Record) { r.Tools[1].Parameters = []byte(`{"type": "object"}`) },
		func(r *record.Record) { r.Tools[1].Parameters = []byte(`{oops`) },
		func(r *record.Record) { r.Tools[0].Response = []byte(`{"type":"string"}`) },
		func(r *record.Record) {
			r.Tools[1].Response = []byte(`{"type":"object","properties":{"id":{"type":"integer"}}}`)
		},
		func(r *record.Record) { r.Tools = r.Tools[:1] },
		func(r *record.Record) { r.Tools = nil },
		func(r *record.Record) { r.Tools, r.System = nil, "" },
		func(r *record.Record) { r.Tools = append(r.Tools, r.Tools[0]) },
	}
	var memo TokenMemo
	for round := range 2 {
		for i, change := range variants {
			r := base.Clone()
			change(r)
			if got, want := memo.RecordTokens(r), RecordTokens(r); got != want {
				t.Fatalf("round %d, variant %d: memo %d, RecordTokens %d", round, i, got, want)
			}
		}
	}
	if n := len(memo.systems); n != len(variants)-1 { // one without a system message
		t.Errorf("memo holds %d system texts, want %d", n, len(variants)-1)
	}
	withResponse := base.Clone()
	withResponse.Tools[0].Response = []byte(`{"type":"object","properties":{"temperature":{"type":"number"}}}`)
	if RecordTokens(withResponse) <= RecordTokens(base) {
		t.Errorf("a response schema adds no tokens: %d vs %d", RecordTokens(withResponse), RecordTokens(base))
	}

	key, _ := systemKey(base)
	other := TokenMemo{
		texts:   map[uint64]memoText{maphash.String(memoSeed, "hi"): {"ho ho ho", 99}},
		systems: map[uint64]memoSystem{key: {base.System, base.Tools[:1], 99}},
	}
	for range 2 {
		if got, want := other.RecordTokens(base), RecordTokens(base); got != want {
			t.Fatalf("with other texts under the same hashes: %d, want %d", got, want)
		}
	}
}

// TestSystemCountAsTokens: counting a system text tool by tool
// (systemCount) gives Tokens' count of the whole text, for the tool lists
// of the sample records, for lists drawn from their tools (as meta_tool
// makes them), and for texts a part cannot be counted alone in (not UTF-8,
// longer than tokenChunk), first with the tools' parts new and then
// remembered.
func TestSystemCountAsTokens(t *testing.T) {
	recs, _ := sampleRecords(t, "xlam")
	more, _ := sampleRecords(t, "glaive")
	recs = append(recs[:400], more[:400]...)
	var lib []record.Tool
	for _, r := range recs {
		lib = append(lib, r.Tools...)
	}
	long := strings.Repeat("word ", tokenChunk/5+10)
	odd := []record.Tool{
		{Name: "bad", Description: "not UTF-8 \xff here", Parameters: []byte(`{"type":"object"}`)},
		{Name: "raw", Description: "d", Parameters: []byte("{\"a\":\"\xfe\"}")},
		{Name: "long", Description: long, Parameters: []byte(`{}`)},
		{Name: "run", Description: strings.Repeat("x", tokenChunk+100), Parameters: []byte(`{}`)},
		{Name: "notjson", Description: "quote \" and name", Parameters: []byte(`{oops`)},
		{Name: "empty", Description: "", Parameters: nil},
		{Name: `"name`, Description: `{"name":"x"}`, Parameters: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
		{Name: "天气", Description: "查询城市的天气情况", Parameters: []byte(`{"type":"object","properties":{"城市":{"type":"string"}}}`)},
		{Name: "resp", Description: "d", Parameters: []byte(`{}`), Response: []byte(`{"type":"array","items":{"type":"string"}}`)},
		{Name: "resp2", Description: "d", Parameters: []byte(`{}`), Response: []byte(" { \"type\" : \"object\" }\n")},
		{Name: "blankresp", Description: "d", Parameters: []byte(`{}`), Response: []byte("  ")},
		{Name: "badresp", Description: "d", Parameters: []byte(`{}`), Response: []byte(`{oops "name`)},
	}
	var cases []*record.Record
	for i, r := range recs {
		cases = append(cases, r)
		d := &record.Record{System: r.System}
		for k := range 1 + i%6 {
			d.Tools = append(d.Tools, lib[(i*7+k*13)%len(lib)])
		}
		if i%9 == 0 {
			d.Tools = append(d.Tools, odd[i/9%len(odd)])
		}
		switch i % 5 {
		case 1:
			d.System = ""
		case 2:
			d.System = long
		case 3:
			d.System = "sys \xff"
		}
		cases = append(cases, d)
	}
	for _, tool := range odd {
		cases = append(cases, &record.Record{Tools: []record.Tool{tool}}, &record.Record{System: "s", Tools: []record.Tool{odd[0], tool, odd[7]}})
	}
	var memo TokenMemo
	for round := range 2 {
		for i, r := range cases {
			if got, want := memo.systemCount(r), Tokens(systemText(r)); got != want {
				t.Fatalf("round %d, case %d (%d tools): systemCount %d, Tokens %d", round, i, len(r.Tools), got, want)
			}
		}
	}
	if len(memo.tools) == 0 {
		t.Fatal("no tool part remembered")
	}
}

// TestStrTable: the table gives back every number put, across its
// growth, and holds no string that was not put: strings that share their
// first or last bytes, or differ only in trailing zero bytes or length.
func TestStrTable(t *testing.T) {
	var tab strTable
	if _, ok := tab.get(strKeyOf("ab")); ok {
		t.Fatal("the empty table holds a key")
	}
	want := map[string]uint32{}
	for i := range 5000 {
		for _, p := range []string{
			fmt.Sprintf("%05d", i),
			string([]byte{byte(i), byte(i >> 8)}),
			string([]byte{byte(i), byte(i >> 8), 0}),
			string([]byte{0, 0, 0, 0, 0, byte(i), byte(i >> 8)}),
			fmt.Sprintf("%012d", i),
			fmt.Sprintf("%08d\x00", i),
			string([]byte{byte(i)}),
		} {
			if _, ok := want[p]; ok {
				continue
			}
			if _, ok := tab.get(strKeyOf(p)); ok {
				t.Fatalf("%q found before it was put", p)
			}
			v := uint32(len(want)*7919) % (1 << strValBits)
			tab.put(strKeyOf(p), v, 0)
			want[p] = v
		}
	}
	if tab.n != len(want) {
		t.Fatalf("%d keys held, %d put", tab.n, len(want))
	}
	for p, v := range want {
		if got, ok := tab.get(strKeyOf(p)); !ok || got != v {
			t.Fatalf("%q: %d, %v; want %d", p, got, ok, v)
		}
	}
	for _, p := range []string{"zz", "0000", "999999", "\xff\xff\xff\xff\xff\xff\xff", "00000000000", "0000000000000"[:strKeyMax], "00000000\x00\x00"} {
		if _, ok := want[p]; ok {
			continue
		}
		if _, ok := tab.get(strKeyOf(p)); ok {
			t.Errorf("%q found, never put", p)
		}
	}
}

// TestStrKey: strings of up to strKeyMax bytes have distinct keys, also
// those that differ only in trailing zero bytes, and leave the number's
// bits free; the key read with loads of 8 bytes is strKeyOf's.
func TestStrKey(t *testing.T) {
	seen := map[strKey]string{}
	for _, p := range []string{"\x00", "\x00\x00", "a", "a\x00", "ab", "ba", "abcdefg", "abcdef\x00", "\xff\xff\xff\xff\xff\xff\xff",
		"中", "中\x00", "abcdefgh", "abcdefg\x00", "abcdefgh\x00", "abcdefghijkl", "abcdefghijk\x00", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"} {
		k := strKeyOf(p)
		if q, ok := seen[k]; ok {
			t.Errorf("%q and %q share key %x", p, q, k)
		}
		if k.hi == 0 || k.hi>>strValAt != 0 {
			t.Errorf("%q: key %x", p, k)
		}
		seen[k] = p
	}
	// strKeyOf against the key made byte by byte, at every length.
	for _, s := range []string{"abcdefghijkl", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4", "中文字符", "\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06"} {
		for n := 1; n <= strKeyMax; n++ {
			var want strKey
			for i := n - 1; i >= 0; i-- {
				if i >= 8 {
					want.hi = want.hi<<8 | uint64(s[i])
				} else {
					want.lo = want.lo<<8 | uint64(s[i])
				}
			}
			want.hi |= uint64(n) << 32
			if got := strKeyOf(s[:n]); got != want {
				t.Errorf("strKeyOf(%q) = %x, byte by byte %x", s[:n], got, want)
			}
		}
	}
	for _, s := range []string{"ab", "abcdefg", "abcdefgh", "abcdefghij", "abcdefghijklmnopq", "中文", "中文字符串", "中文字符串中文字符串",
		"\x00\x00\x01", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"} {
		for n := 1; n <= min(len(s), strKeyMax); n++ {
			if got, want := strKeyAt(s, n), strKeyOf(s[:n]); got != want {
				t.Errorf("%q[:%d]: %x, want %x", s, n, got, want)
			}
		}
	}
}

// TestStrTableFill: a table filled at once gives back every number of
// its entries and holds no other string, as one put entry by entry.
func TestStrTableFill(t *testing.T) {
	var entries []strKey
	want := map[string]uint32{}
	for i := range 20000 {
		p := fmt.Sprintf("%x", i*7919)
		if _, ok := want[p]; ok {
			continue
		}
		v := uint32(i) % (1 << strValBits)
		want[p] = v
		k := strKeyOf(p)
		entries = append(entries, strKey{k.lo, k.hi | uint64(v)<<strValAt})
	}
	var tab strTable
	tab.fill(entries, 1<<10)
	if tab.n != len(want) || 2*tab.n > len(tab.slots) {
		t.Fatalf("%d keys held in %d slots, %d filled", tab.n, len(tab.slots), len(want))
	}
	for p, v := range want {
		if got, ok := tab.get(strKeyOf(p)); !ok || got != v {
			t.Fatalf("%q: %d, %v; want %d", p, got, ok, v)
		}
	}
	for _, p := range []string{"zz", "g", "fffffffffff", "-1"} {
		if _, ok := tab.get(strKeyOf(p)); ok {
			t.Errorf("%q found, never filled", p)
		}
	}
}

// tokensAsBefore is Tokens as it was before countUTF8: the text checked
// to be UTF-8 first.
func tokensAsBefore(text string) int {
	if text == "" {
		return 0
	}
	if !utf8.ValidString(text) {
		n, _ := countChunked(text, tokenChunk, libraryCount)
		return n
	}
	if len(text) > tokenChunk && forcedCut(text, tokenChunk) {
		n, _ := countChunked(text, tokenChunk, countPieces)
		return n
	}
	return countPieces(text)
}

// TestTokensNotUTF8: text that is not UTF-8 is counted as the library
// counts it (U+FFFD for bad bytes), whether its good pieces are remembered
// or not, and no bad piece is remembered.
func TestTokensNotUTF8(t *testing.T) {
	for _, text := range []string{
		"\x80", "\xff", "a\xffb", "hello \xe4\xb8", "\xe4\xb8 hello", "今天\xe5天气", "\xed\xa0\x80", // a surrogate
		"\xc0\xaf", // overlong
		"word \x80\x80\x80 word", "'\xc5", "12\xf0\x9f\x98", "\xf4\x90\x80\x80", "  \xa0 ", "\t\n\x85",
		"The quick brown fox's tail\xfe, it'll be fine.", "abc\x7f\xff",
	} {
		for round := range 2 {
			if round == 0 {
				forgetPieces()
			}
			want := libraryCount(text)
			if got := Tokens(text); got != want {
				t.Errorf("round %d: Tokens(%q) = %d, the library %d", round, text, got, want)
			}
			if _, ok := countUTF8(text); ok {
				t.Errorf("countUTF8(%q) reports UTF-8", text)
			}
		}
	}
	pieceCounts.RLock()
	defer pieceCounts.RUnlock()
	for piece := range pieceCounts.m {
		if !utf8.ValidString(piece) {
			t.Errorf("remembered a piece that is not UTF-8: %q", piece)
		}
	}
	for _, sl := range pieceCounts.small.slots {
		if sl.hi != 0 && !utf8.ValidString(strKeyString(sl)) {
			t.Errorf("remembered a short piece that is not UTF-8: %q", strKeyString(sl))
		}
	}
}

// strKeyString is the string of a strTable slot.
func strKeyString(sl strKey) string {
	n := int(sl.hi >> 32 & 0xF)
	var b []byte
	for i := range n {
		if i < 8 {
			b = append(b, byte(sl.lo>>(8*i)))
		} else {
			b = append(b, byte(sl.hi>>(8*(i-8))))
		}
	}
	return string(b)
}

// FuzzTokensAnyBytes: for any bytes, Tokens counts as it did when it
// checked the text to be UTF-8 first, and countUTF8 tells UTF-8 apart.
func FuzzTokensAnyBytes(f *testing.F) {
	for _, s := range tokenTexts {
		f.Add(s)
	}
	f.Add("a\xffb 今天\xe5天气 \x80")
	f.Add("\xed\xa0\x80 x'\xc5")
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := Tokens(text), tokensAsBefore(text); got != want {
			t.Fatalf("Tokens(%q) = %d, before %d", text, got, want)
		}
		if _, ok := countUTF8(text); len(text) <= tokenChunk && ok != utf8.ValidString(text) {
			t.Fatalf("countUTF8(%q) ok = %v", text, ok)
		}
	})
}

// TestASCIICut: asciiCut is cutBetween for every pair of ASCII characters.
func TestASCIICut(t *testing.T) {
	for a := range byte(utf8.RuneSelf) {
		for b := range byte(utf8.RuneSelf) {
			if got, want := asciiCut(a, b), cutBetween(rune(a), rune(b)); got != want {
				t.Errorf("asciiCut(%q, %q) = %v, cutBetween %v", a, b, got, want)
			}
		}
	}
}

// TestTokenMemoCalls: a call's count is Tokens of its JSON, remembered
// under its name and arguments: calls that share a name or arguments, or
// whose arguments are no JSON, are told apart, in a new memo and a warm one,
// and a memo whose budget is spent counts without keeping.
func TestTokenMemoCalls(t *testing.T) {
	calls := []record.Call{
		{Name: "f", Arguments: []byte(`{"a":1}`)},
		{Name: "f", Arguments: []byte(`{"a": 1}`)}, // the same JSON text
		{Name: "f", Arguments: []byte(`{"a":2}`)},
		{Name: "g", Arguments: []byte(`{"a":1}`)},
		{Name: "f\x00", Arguments: []byte(`{"a":1}`)}, // run together, the same bytes as the next
		{Name: "f", Arguments: []byte("\x00{\"a\":1}")},
		{Name: "get_weather", Arguments: []byte(`{"city": "巴黎", "days": [1, 2, 3]}`)},
		{Name: "bad", Arguments: []byte(`{oops`)},
		{Name: "bad", Arguments: []byte("\xff\xfe")},
		{Name: "", Arguments: nil},
		{Name: "long", Arguments: []byte(`{"s":"` + strings.Repeat("x ", memoTextMax/2) + `"}`)},
	}
	var memo TokenMemo
	for round := range 2 {
		for i := range calls {
			if got, want := memo.callTokens(&calls[i]), Tokens(callJSON(calls[i])); got != want {
				t.Errorf("round %d: callTokens(%q, %.20q) = %d, Tokens = %d", round, calls[i].Name, calls[i].Arguments, got, want)
			}
		}
	}
	if len(memo.calls) != len(calls)-1 {
		t.Errorf("memo holds %d calls, want %d (not the long one)", len(memo.calls), len(calls)-1)
	}
	full := TokenMemo{used: memoBudget}
	if full.callTokens(&calls[0]) != Tokens(callJSON(calls[0])) || len(full.calls) != 0 {
		t.Error("a memo whose budget is spent must count without keeping")
	}
	// The memo keeps copies: changing the caller's arguments afterwards
	// does not change what it remembered.
	args := []byte(`{"q":"hello"}`)
	c := record.Call{Name: "h", Arguments: args}
	want := memo.callTokens(&c)
	copy(args, `{"q":"HELLO"}`)
	if got := memo.callTokens(&record.Call{Name: "h", Arguments: []byte(`{"q":"hello"}`)}); got != want {
		t.Errorf("after the caller's bytes changed: %d, want %d", got, want)
	}
}
