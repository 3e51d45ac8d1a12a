package formats

import (
	"strings"
	"testing"
	"unicode"

	"github.com/augmentdata/augment/stages/record"
)

func TestIsChinese(t *testing.T) {
	msg := func(role, s string) record.Message { return record.Message{Role: role, Content: s} }
	u, a := record.RoleUser, record.RoleAssistant
	tests := []struct {
		name string
		ms   []record.Message
		want bool
	}{
		{"empty", nil, false},
		{"english", []record.Message{msg(u, "What is the weather?"), msg(a, "Sunny.")}, false},
		{"chinese", []record.Message{msg(u, "你好，请介绍一下台北。"), msg(a, "台北是台湾的最大城市。")}, true},
		{"one han", []record.Message{msg(u, "台 is a character")}, false},
		{"two han, few letters", []record.Message{msg(u, "台北 ok")}, true},
		// 2 Han against 7 letters: 3*2 < 7.
		{"two han, many letters", []record.Message{msg(u, "台北 is great")}, false},
		// Letters of an ASCII-only turn count against the Han of another.
		{"letters in another turn", []record.Message{msg(u, strings.Repeat("abc ", 10)), msg(a, "台北")}, false},
		{"han in another turn", []record.Message{msg(u, "ok"), msg(a, "台北台北")}, true},
		{"japanese", []record.Message{msg(u, "東京はどこですか。ひらがなとカタカナ")}, false},
		{"a little kana", []record.Message{msg(u, strings.Repeat("北京", 10)+"の")}, true},
		{"tool and system turns do not count", []record.Message{msg(record.RoleSystem, "你好你好"), msg(record.RoleTool, "台北"), msg(u, "hi")}, false},
		{"rare han block", []record.Message{msg(u, "\U00020000\U00020001")}, true},
		{"accents are not letters here", []record.Message{msg(u, "台北 éé")}, true},
	}
	for _, tt := range tests {
		if got := isChinese(tt.ms); got != tt.want {
			t.Errorf("%s: isChinese = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCountHan checks the undecoded count of the main Han block against
// decoding every rune, at the block's edges and around ASCII words.
func TestCountHan(t *testing.T) {
	slow := refCountHan
	for _, s := range []string{
		"", "abc", "一", "\u4dff\u4e00\u9fff\ua000", "\u4fff\u5000", "\u3fff\u4000", "丁七 abcdefgh 万丈三上下丌不与丏",
		"abcdefg台", "abcdefgh台北", "台\xe4\xb8", "\xe5\x8f", "\xe9\xbf", "x\xe4\xb8\x80", "ひらがなカタカナ漢字",
		"\U00020000\U0002A6DF", "\u3400\u4dbf", "éééééééé台", strings.Repeat("台北ab", 9),
		"台北\xe4\xb8", "台\xe0\x80\x80北", "北\xed\xa0\x80台", "ひら\xe3\x81", "台北é北", "台北\U00020000北", "\xe4\xb8\xe4\xb8\x80",
	} {
		h, k := countHan(s)
		if wh, wk := slow(s); h != wh || k != wk {
			t.Errorf("%q: han %d kana %d, want %d %d", s, h, k, wh, wk)
		}
	}
}

// TestCountHanEveryRune checks countHan on every rune alone and after a
// Han character and an ASCII letter (its table against the unicode
// package's).
func TestCountHanEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		for _, s := range []string{string(r), "台" + string(r) + "a"} {
			h, k := countHan(s)
			if wh, wk := refCountHan(s); h != wh || k != wk {
				t.Fatalf("%U in %q: han %d kana %d, want %d %d", r, s, h, k, wh, wk)
			}
		}
	}
}

// TestCountHanWords checks countHan's word-at-a-time reading (texts of ten
// bytes and more) against decoding: every rune in a text of runes of every
// width, and that text cut at every byte offset into pieces that start and
// end inside characters, with stray bytes between them.
func TestCountHanWords(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r <= unicode.MaxRune; r++ {
		b.WriteRune(r)
		if r%97 == 0 {
			b.WriteString("台a\xe5\x8f\xf0\x80")
		}
	}
	all := b.String()
	for size := 10; size <= 40; size += 15 {
		for at := 0; at+size <= len(all); at += 7 {
			s := all[at : at+size]
			h, k := countHan(s)
			if wh, wk := refCountHan(s); h != wh || k != wk {
				t.Fatalf("% x: han %d kana %d, want %d %d", s, h, k, wh, wk)
			}
		}
	}
	h, k := countHan(all)
	if wh, wk := refCountHan(all); h != wh || k != wk {
		t.Fatalf("every rune: han %d kana %d, want %d %d", h, k, wh, wk)
	}
}

func TestCountLatin(t *testing.T) {
	slow := refCountLatin
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, s := range []string{"", "abc", "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz", "@[`{@[`{@[`{", string(all), "台北 is great, éé", strings.Repeat("Zz9 台", 7)} {
		for k := range min(len(s), 9) { // every alignment
			if got, want := countLatin(s[k:]), slow(s[k:]); got != want {
				t.Errorf("%q: %d letters, want %d", s[k:], got, want)
			}
		}
	}
}

// refCountHan and refCountLatin are the plain loops countHan and
// countLatin must agree with.
func refCountHan(s string) (han, kana int) {
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			kana++
		}
	}
	return han, kana
}

func refCountLatin(s string) (n int) {
	for j := 0; j < len(s); j++ {
		if c := s[j] | 0x20; c >= 'a' && c <= 'z' {
			n++
		}
	}
	return n
}

func FuzzCountText(f *testing.F) {
	for _, s := range []string{"台北 is great", "東京はどこですか", "\xe4\xb8\x80\xe4\xb7\xbf", "plain ascii words here"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, k := countHan(s)
		if wh, wk := refCountHan(s); h != wh || k != wk {
			t.Fatalf("%q: han %d kana %d, want %d %d", s, h, k, wh, wk)
		}
		if n, want := countLatin(s), refCountLatin(s); n != want {
			t.Fatalf("%q: %d letters, want %d", s, n, want)
		}
	})
}

// refIsChinese is isChinese with every count made (refCountHan,
// refCountLatin), which isChinese's shortcut must agree with.
func refIsChinese(ms []record.Message) bool {
	han, kana, latin := 0, 0, 0
	for _, m := range ms {
		if m.Role == record.RoleUser || m.Role == record.RoleAssistant {
			h, k := refCountHan(m.Content)
			han, kana, latin = han+h, kana+k, latin+refCountLatin(m.Content)
		}
	}
	return han >= 2 && 10*kana < han && 3*han >= latin
}

func FuzzIsChinese(f *testing.F) {
	for _, s := range [][2]string{{"台北abcdef", ""}, {"台北abcdefg", "x"}, {"你好，请介绍一下台北。", "ok then"}, {"\U00020000\U00020001ab", "\xe5\x8f台"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, user, assistant string) {
		ms := []record.Message{{Role: record.RoleUser, Content: user}, {Role: record.RoleAssistant, Content: assistant}}
		if got, want := isChinese(ms), refIsChinese(ms); got != want {
			t.Fatalf("%q, %q: isChinese %v, want %v", user, assistant, got, want)
		}
	})
}

// hanBenchText is Chinese mixed with ASCII and CJK punctuation, as the zh
// demo dialogues are.
var hanBenchText = strings.Repeat("你好，请帮我查一下台北明天的天气。I need the forecast for Taipei (#12). 谢谢！", 40)

func BenchmarkCountHan(b *testing.B) {
	b.SetBytes(int64(len(hanBenchText)))
	n := 0
	for range b.N {
		h, k := countHan(hanBenchText)
		n += h + k
	}
	if n == 0 {
		b.Fatal("no Han counted")
	}
}
