package zhconv

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/cputime"
)

func mustS2TWP(t testing.TB) *Converter {
	t.Helper()
	c, err := S2TWP()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustT2S(t testing.TB) *Converter {
	t.Helper()
	c, err := T2S()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestS2TWP: outputs of the reference, OpenCC 1.1.6 `opencc -c s2twp.json`.
func TestS2TWP(t *testing.T) {
	cases := []struct{ in, want string }{
		{"来确保存储在区块链上", "來確保儲存在區塊鏈上"},
		{"软件", "軟體"},
		{"网络", "網路"},
		{"信息", "資訊"},
		{"鼠标", "滑鼠"},
		{"内存", "記憶體"},
		{"打印机", "印表機"},
		{"视频", "影片"},
		{"我需要为John Doe生成一张发票。", "我需要為John Doe生成一張發票。"},
		{"軟體已經是繁體", "軟體已經是繁體"},
		{"plain ASCII <b>&</b>", "plain ASCII <b>&</b>"},
		{"", ""},
		{"bad \xff utf8 软件", "bad \xff utf8 软件"},
	}
	c := mustS2TWP(t)
	for _, tc := range cases {
		if got := c.Convert(tc.in); got != tc.want {
			t.Errorf("S2TWP(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestT2S: outputs of the reference, `opencc -c t2s.json`.
func TestT2S(t *testing.T) {
	cases := []struct{ in, want string }{
		{"萬里", "万里"},
		{"軟體", "软体"},
		{"記憶體", "记忆体"},
		{"頭髮", "头发"},
		{"plain", "plain"},
	}
	c := mustT2S(t)
	for _, tc := range cases {
		if got := c.Convert(tc.in); got != tc.want {
			t.Errorf("T2S(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSegments: OpenCC's segmentation of the reported corruption. 确保 is
// a phrase of STPhrases and so one segment; the characters after it, where
// no phrase starts, form another, in which the Taiwan phrase 存儲→儲存
// applies. 保存→儲存 would span both and must not.
func TestSegments(t *testing.T) {
	got := mustS2TWP(t).Segments("来确保存储在区块链上")
	want := []Segment{{"来", "來"}, {"确保", "確保"}, {"存储在区块链上", "儲存在區塊鏈上"}}
	if !slices.Equal(got, want) {
		t.Errorf("Segments = %q\nwant %q", got, want)
	}
	// 计算 is a phrase, so the Taiwan phrase 計算機→電腦 cannot apply: the
	// reference writes 計算機科學 too.
	got = mustS2TWP(t).Segments("ab 计算机科学 cd")
	want = []Segment{{"ab ", "ab "}, {"计算", "計算"}, {"机科学 cd", "機科學 cd"}}
	if !slices.Equal(got, want) {
		t.Errorf("Segments = %q\nwant %q", got, want)
	}
}

// lossyTW are the values of Taiwan phrases that drop non-Chinese characters
// of their keys (U盤→隨身碟).
func lossyTW(t testing.TB) []string {
	var out []string
	for _, name := range TWPhrases {
		es, err := Entries(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if nonCJK(e.Key) != nonCJK(e.Values[0]) {
				out = append(out, e.Values[0])
			}
		}
	}
	return out
}

// nonCJK returns the characters of s below the CJK blocks: every character
// no dictionary key consists of.
func nonCJK(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x2E80 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func FuzzConvert(f *testing.F) {
	for _, s := range append(slices.Clone(tricky), "", "ascii only", "\xff\xfe软件", "U盘和PN结", "SQL注入", "a\x00b软件", "𠀀𪚥软件") {
		f.Add(s)
	}
	s2twp, t2s := mustS2TWP(f), mustT2S(f)
	lossy := lossyTW(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []*Converter{s2twp, t2s} {
			out := c.Convert(s)
			if !utf8.ValidString(s) {
				if out != s {
					t.Fatalf("invalid UTF-8 changed: %q → %q", s, out)
				}
				continue
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%q → invalid UTF-8 %q", s, out)
			}
			if nonCJK(s) == s && out != s {
				t.Fatalf("text without CJK characters changed: %q → %q", s, out)
			}
			if !slices.ContainsFunc(lossy, func(v string) bool { return strings.Contains(out, v) }) && nonCJK(out) != nonCJK(s) {
				t.Fatalf("non-CJK characters changed: %q → %q", s, out)
			}
			var src, dst strings.Builder
			for _, seg := range c.Segments(s) {
				if seg.Src == "" {
					t.Fatalf("empty segment in %q", s)
				}
				src.WriteString(seg.Src)
				dst.WriteString(seg.Out)
			}
			if src.String() != s || dst.String() != out {
				t.Fatalf("segments of %q join to %q → %q, want → %q", s, src.String(), dst.String(), out)
			}
		}
		// Idempotence where OpenCC has it: neither conversion is idempotent
		// in general (s2twp 萬里→萬裡, t2s 乾圖→乾图→干图), but output in
		// which no dictionary key starts anywhere with a value other than
		// itself converts to itself.
		for _, c := range []*Converter{s2twp, t2s} {
			if o := c.Convert(s); stable(c, o) && c.Convert(o) != o {
				t.Fatalf("%q → %q → %q", s, o, c.Convert(o))
			}
		}
	})
}

// stable reports whether, at every position of s, the longest key of each
// of c's dictionaries that starts there (if any) maps to itself, so that no
// step of c can change s.
func stable(c *Converter, s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	dicts := []*dict{c.seg}
	for _, g := range c.chain {
		dicts = append(dicts, g...)
	}
	for i := 0; i < len(s); i += runeLen(s, i) {
		for _, d := range dicts {
			if n, v, ok := d.longest(s, i); ok && v != s[i:i+n] {
				return false
			}
		}
	}
	return true
}

// TestStable: the idempotence property of FuzzConvert is not vacuous; most
// converted text is stable and converts to itself.
func TestStable(t *testing.T) {
	c := mustS2TWP(t)
	n, stableN := 0, 0
	for _, s := range tricky {
		o := c.Convert(s)
		n++
		if stable(c, o) {
			stableN++
			if c.Convert(o) != o {
				t.Errorf("%q → %q → %q", s, o, c.Convert(o))
			}
		}
	}
	if stableN < n/2 {
		t.Errorf("only %d of %d conversions are stable", stableN, n)
	}
	if stable(c, "萬里") {
		t.Error("萬里 is stable, but s2twp writes 萬裡")
	}
}

// BenchmarkConvert measures s2twp and t2s on the Chinese text of the demo's
// zh dump and the tricky compounds (and ../shared/data's zh files when
// present). Besides MB/s of wall time it reports throughput per CPU second
// (MB/cpu-s, where the platform tells), which a busy shared machine does
// not distort.
func BenchmarkConvert(b *testing.B) {
	text := strings.Join(corpus(b), "\n")
	chars := utf8.RuneCountInString(text)
	for _, bc := range []struct {
		name string
		c    *Converter
	}{{"s2twp", mustS2TWP(b)}, {"t2s", mustT2S(b)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := cputime.Process()
			for b.Loop() {
				bc.c.Convert(text)
			}
			b.ReportMetric(float64(chars)*float64(b.N)/b.Elapsed().Seconds(), "chars/s")
			if cpu1 := cputime.Process(); cpu0 > 0 && cpu1 > cpu0 {
				b.ReportMetric(float64(len(text))*float64(b.N)/(cpu1-cpu0).Seconds()/1e6, "MB/cpu-s")
			}
		})
	}
}
