package translate

import (
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/translate/zhconv"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToTaiwan(t *testing.T) {
	cases := []struct{ in, want string }{
		{"软件", "軟體"},
		{"网络", "網路"},
		{"信息", "資訊"},
		{"鼠标", "滑鼠"},
		{"内存", "記憶體"},
		{"打印机", "印表機"},
		{"视频", "影片"},
		// Taiwan phrases apply inside one segment of the source, never
		// across two: 确保|存储 must not become 確|儲存|儲 through 保存→儲存.
		{"来确保存储在区块链上", "來確保儲存在區塊鏈上"},
		{"我需要为John Doe生成一张发票。", "我需要為John Doe生成一張發票。"},
		{"軟體已經是繁體", "軟體已經是繁體"},
		{"plain ASCII <b>&</b>", "plain ASCII <b>&</b>"},
		{"", ""},
		{"bad \xff utf8 软件", "bad \xff utf8 软件"}, // invalid UTF-8 is left as it is
	}
	for _, c := range cases {
		if got := toTaiwan(c.in); got != c.want {
			t.Errorf("toTaiwan(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestToTaiwanRepaired: OpenCC's greedy phrase match keeps 恒 inside 永恒生命
// (it matches the proper name 恒生); the repair converts it.
func TestToTaiwanRepaired(t *testing.T) {
	cases := []struct{ in, plain, repaired string }{
		{"永恒生命", "永恒生命", "永恆生命"},
		// OpenCC keeps these on purpose; the stage does not (README).
		{"恒生银行", "恒生銀行", "恆生銀行"},
		{"恒大", "恒大", "恆大"},
		{"出戏", "出戏", "出戲"},
		{"北马里亚纳群岛", "北马里亞納群島", "北馬里亞納群島"},
		{"软件", "軟體", "軟體"},
	}
	for _, c := range cases {
		if got := toTaiwan(c.in); got != c.plain {
			t.Errorf("toTaiwan(%q) = %q, want %q", c.in, got, c.plain)
		}
		if got := mustConvert(t, c.in); got != c.repaired {
			t.Errorf("convertText(%q, repair) = %q, want %q", c.in, got, c.repaired)
		}
	}
}

func TestHasSimplifiedOnly(t *testing.T) {
	cases := []struct {
		in   string
		want rune // 0: none
	}{
		{"", 0},
		{"hello, world", 0},
		{"軟體與網路", 0},
		{"软件", '软'},
		{"軟体", '体'},
		{"后来", '来'}, // 后 is also Traditional (皇后); 来 is not
		{"皇后", 0},
		{"干杯才好", 0}, // 干, 才: shared by both scripts
		{"白痴", 0},   // 痴 is the Taiwan standard form of 癡
		{"恒生指數", '恒'},
		{"abc\xff软", '软'},
	}
	for _, c := range cases {
		r, ok := HasSimplifiedOnly(c.in)
		if ok != (c.want != 0) || r != c.want {
			t.Errorf("HasSimplifiedOnly(%q) = %q, %v; want %q", c.in, r, ok, c.want)
		}
	}
}

// TestMostlyForeign: translations that keep names, product names, codes,
// URLs and quoted locked values in a Chinese sentence pass; text of which a
// teacher translated only a word or two, or one sentence of several, does
// not.
func TestMostlyForeign(t *testing.T) {
	cases := []struct {
		in   string
		keep []string
		want bool
	}{
		{"", nil, false},
		{"請幫我在 Google Calendar 上預約會議", nil, false},
		{"請幫我在Google Calendar上預約會議", nil, false},
		{"我在網路上找到 Garden Inn（HTL-4471），每晚 120.50。預計會下小雨，氣溫 14 °C。要幫您預訂嗎？", nil, false},
		{"好，請幫 Amy Chen 預訂。", nil, false},
		{"已為您預訂《The Lord of the Rings》的電影票。", nil, false},
		{"請呼叫 get_weather 查詢 https://api.example.com/v1/weather?city=Paris&unit=celsius 的結果，並寄到 amy@example.com。", nil, false},
		{"以下函式回傳兩數之和：\n```python\ndef add(first, second):\n    return first + second\n```\n呼叫 `add(first, second)` 即可。", nil, false},
		{"用法如下：\n```bash\ngit commit --amend --no-edit\ngit push --force origin main\n```", nil, false},
		{"用法如下：`git commit --amend --no-edit` 後 `git push --force origin main`", nil, false},
		{"用法如下：\n```bash\ngit commit --amend --no-edit\ngit push --force origin main\n", nil, true}, // a fence never closed: counted
		{"狀態：Awaiting Final Manager Approval Before Shipping", []string{"Awaiting Final Manager Approval Before Shipping"}, false},
		// The same without the locked value: six English words, two
		// Chinese characters.
		{"狀態：Awaiting Final Manager Approval Before Shipping", nil, true},
		// The translate QA's answers: one or two words translated.
		{"請 book a meeting called Weekly team sync on 2026-12-01 in room RM-4821, high priority, 30 minutes.", nil, true},
		{"您的 meeting BK-99812 is booked. Paris has light rain at 12 degrees and London is cloudy at 9 degrees.", nil, true},
		{"請幫我預訂會議。Also check the weather in Paris and London tomorrow, and send the agenda to everyone on the team.", nil, true},
	}
	for _, c := range cases {
		if got := mostlyForeign(c.in, c.keep); got != c.want {
			t.Errorf("mostlyForeign(%q, %q) = %v, want %v", c.in, c.keep, got, c.want)
		}
	}
}

// TestRepairComplete: every Simplified-only character converts to text
// without Simplified-only characters, so Convert's output never has any.
func TestRepairComplete(t *testing.T) {
	c := mustChinese()
	if len(c.simplified) < 2000 {
		t.Fatalf("only %d Simplified-only characters found; the dictionaries did not load fully", len(c.simplified))
	}
	var bad []string
	for r := range c.simplified {
		if _, ok := HasSimplifiedOnly(mustConvert(t, string(r))); ok {
			bad = append(bad, string(r))
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("not repaired: %s", strings.Join(bad, " "))
	}
}

func FuzzHasSimplifiedOnly(f *testing.F) {
	for _, s := range []string{"", "软件", "軟體", "永恒生命", "北马里亚纳群岛", "ascii", "\xff\xfe", "皇后来了"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := HasSimplifiedOnly(s)
		if ok && !strings.ContainsRune(s, r) {
			t.Fatalf("reported %q, which is not in %q", r, s)
		}
		if !ok && r != 0 {
			t.Fatalf("no hit but rune %q", r)
		}
		rep := mustConvert(t, s)
		if !utf8.ValidString(s) {
			if rep != s {
				t.Fatalf("invalid UTF-8 was changed")
			}
			return
		}
		if r, ok := HasSimplifiedOnly(rep); ok {
			t.Fatalf("convertText(%q, repair) = %q keeps %q", s, rep, r)
		}
		if !hasHan(s) && rep != s {
			t.Fatalf("text without Han changed: %q → %q", s, rep)
		}
	})
}

func mustConvert(tb testing.TB, s string) string {
	tb.Helper()
	out, err := convertText(s)
	if err != nil {
		tb.Fatalf("convertText(%q): %v", s, err)
	}
	return out
}

func mustConvertRecord(tb testing.TB, r *record.Record) *record.Record {
	tb.Helper()
	out, err := Convert(r)
	if err != nil {
		tb.Fatalf("Convert(%s): %v", r.ID, err)
	}
	return out
}

// TestIntact: the conversion check accepts OpenCC's conversions, Taiwan
// phrases included, and rejects the corruption of the former Go port, which
// matched the Taiwan phrase 保存→儲存 across the segments 确保|存储.
func TestIntact(t *testing.T) {
	c := mustChinese()
	cases := []struct {
		src, out string
		ok       bool
	}{
		{"来确保存储在区块链上", "來確保儲存在區塊鏈上", true},
		{"来确保存储在区块链上", "來確儲存儲在區塊鏈上", false},  // 保 lost, 儲 doubled
		{"来确保存储在区块链上", "來確保存儲在區塊鏈上", true},   // s2t without Taiwan phrases
		{"来确保存储在区块链上", "來確保儲在區塊鏈上", false},   // a character dropped
		{"来确保存储在区块链上", "來確保儲存存在區塊鏈上", false}, // a character doubled
		{"来确保存储在区块链上", "來確保儲存在區塊練上", false},  // 链 → 練: unrelated
		{"软件和内存", "軟體和記憶體", true},
		{"用U盘拷贝", "用隨身碟拷貝", true},
		{"永恒生命", "永恆生命", true}, // the repair
		{"头发很长", "頭髮很長", true},
		{"干燥的干部", "乾燥的幹部", true},
		{"后来", "後來", true},
		{"皇后", "皇后", true},
		{"plain text", "plain text", true},
		{"plain text", "plain test", false},
	}
	for _, tc := range cases {
		segs := c.s2twp.Segments(tc.src)
		ends := make([]int, len(segs))
		n := 0
		for i, s := range segs {
			n += utf8.RuneCountInString(s.Src)
			ends[i] = n
		}
		if _, got := c.readBack.intact(tc.src, tc.out, ends); got != tc.ok {
			t.Errorf("intact(%q, %q) = %v, want %v", tc.src, tc.out, got, tc.ok)
		}
	}
}

// TestIntactDictionaries: the check accepts the conversion of every key of
// the Simplified→Traditional dictionaries and of the Simplified form of every
// Taiwan phrase, alone and between other words, so that it cannot reject a
// correct conversion for want of a dictionary relation.
func TestIntactDictionaries(t *testing.T) {
	t2s, err := zhconv.T2S()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, name := range []string{zhconv.STPhrases, zhconv.STCharacters} {
		es, err := zhconv.Entries(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			keys = append(keys, e.Key)
		}
	}
	for _, name := range zhconv.TWPhrases {
		es, err := zhconv.Entries(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			keys = append(keys, t2s.Convert(e.Key), e.Key, e.Values[0])
		}
	}
	bad := 0
	for _, k := range keys {
		for _, s := range []string{k, "我们" + k + "的数据", k + k} {
			if _, err := convertText(s); err != nil {
				if bad++; bad <= 20 {
					t.Error(err)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d conversions rejected", bad, 3*len(keys))
	}
}

// FuzzConvertText joins dictionary keys picked by the fuzzer's bytes
// (phrases that overlap at their joins, as 确保+存储 do) and requires the
// checked conversion to accept the result and leave no Simplified-only
// character.
func FuzzConvertText(f *testing.F) {
	var words []string
	for _, name := range append([]string{zhconv.STPhrases}, zhconv.TWPhrases...) {
		es, err := zhconv.Entries(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range es {
			words = append(words, e.Key)
		}
	}
	t2s, err := zhconv.T2S()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 1, 2, 3}, "")
	f.Add([]byte{200, 17, 99, 4, 250, 3}, " ")
	f.Fuzz(func(t *testing.T, picks []byte, sep string) {
		var parts []string
		for i := 0; i+1 < len(picks); i += 2 {
			w := words[(int(picks[i])<<8|int(picks[i+1]))*7%len(words)]
			if picks[i]%3 == 0 {
				w = t2s.Convert(w) // Simplified form of a Taiwan phrase
			}
			parts = append(parts, w)
		}
		s := strings.Join(parts, sep)
		out, err := convertText(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if r, ok := HasSimplifiedOnly(out); ok && utf8.ValidString(s) {
			t.Fatalf("convertText(%q) = %q keeps %q", s, out, r)
		}
	})
}
