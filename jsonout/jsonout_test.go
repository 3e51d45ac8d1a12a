package jsonout

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMarshal(t *testing.T) {
	v := map[string]any{"d": "a < b && c > d", "raw": json.RawMessage(`{"x": 1}`), "n": []int{1}}
	for _, tc := range []struct {
		indent, want string
	}{
		{"", `{"d":"a < b && c > d","n":[1],"raw":{"x":1}}`},
		{"  ", "{\n  \"d\": \"a < b && c > d\",\n  \"n\": [\n    1\n  ],\n  \"raw\": {\n    \"x\": 1\n  }\n}"},
	} {
		got, err := MarshalIndent(v, tc.indent)
		if err != nil || string(got) != tc.want {
			t.Errorf("MarshalIndent(%q) = %s, %v; want %s", tc.indent, got, err, tc.want)
		}
	}
	if got, _ := Marshal("<tag>"); string(got) != `"<tag>"` {
		t.Errorf("Marshal escapes HTML: %s", got)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func: no error")
	}
}

// TestAppendStringBlocks: each byte that needs care, at every place of
// the eight-byte blocks AppendString tests together.
func TestAppendStringBlocks(t *testing.T) {
	for _, special := range []string{"\"", "\\", "\n", "\x01", "\x1f", "\x7f", " ", "\u2028", "\u2029", "\u2027", "é", "\xff", "<&>", "\"\"", "\x00\"", "中\n", "中文中文中文\u2028中文中文\u2029", "中文中文中文中文\x01",
		// UTF-8 checked in the copying pass: truncated, overlong, surrogate and four-byte forms.
		"\xe2\x80", "\xe2\x80\xa8", "\xe2\x80\xaa", "\xe4\xb8", "\xc3", "\xc0\x80", "\xe0\x80\x80", "\xe0\xa0\x80", "\xed\xa0\x80", "\xed\x9f\xbf", "\xef\xbf\xbd", "\xf0\x9f\x98\x80", "\xf4\x90\x80\x80", "é中\x80"} {
		for at := 0; at <= 20; at++ {
			v := strings.Repeat("a", at) + special + strings.Repeat("b", 20-at)
			want, _ := Marshal(v)
			for _, room := range appendRooms(v) {
				dst := append(make([]byte, 0, 1+room), 'x')
				if got := AppendString(dst, v); string(got) != "x"+string(want) {
					t.Errorf("%q, room %d: got %s want %s", v, room, got, want)
				}
			}
		}
	}
}

// appendRooms are the rooms AppendString is given after one byte already
// in dst: none, exactly the unescaped text and its quotes (AppendString
// then grows when it meets escapes), and plenty.
func appendRooms(s string) []int { return []int{0, len(s) + 2, 2*len(s) + 64} }

// TestAppendStringRoom: escapes that outrun the room dst has, before,
// between and after runs of non-ASCII text and eight-byte words.
func TestAppendStringRoom(t *testing.T) {
	for _, s := range []string{
		"",
		`"`,
		strings.Repeat(`"`, 40),
		strings.Repeat(`"`, 20) + strings.Repeat("中", 50),
		strings.Repeat(`\"`, 9) + strings.Repeat("é", 33) + "\n",
		strings.Repeat("ab\"cdefgh", 12) + strings.Repeat("\t", 30),
		`<|use_tool|><tool_call>{"name": "get_movie_details", "arguments": {"movie_id":"12345"}}</tool_call>`,
		strings.Repeat("中", 30) + `"` + strings.Repeat("\u2028", 2),
	} {
		want, _ := Marshal(s)
		for _, room := range appendRooms(s) {
			dst := append(make([]byte, 0, 1+room), 'x')
			if got := AppendString(dst, s); string(got) != "x"+string(want) {
				t.Errorf("%q, room %d: got %s want %s", s, room, got, want)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff")
	f.Add(`{"type":"object","properties":{"city":{"type":"string","description":"The city"}}} and some plain text to fill blocks`)
	f.Add(strings.Repeat(`"`, 20) + strings.Repeat("中", 50))
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := Marshal(s)
		for _, room := range appendRooms(s) {
			dst := append(make([]byte, 0, 1+room), 'x')
			if got := AppendString(dst, s); string(got) != "x"+string(want) {
				t.Fatalf("%q, room %d: got %s want %s", s, room, got, want)
			}
		}
	})
}

// BenchmarkAppendString writes texts like the export's: English prose with
// the odd quote and newline, Chinese prose, and compact JSON arguments.
func BenchmarkAppendString(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"english", strings.Repeat("Could you find me a \"quiet\" hotel near the station?\nI arrive on Friday evening. ", 8)},
		{"chinese", strings.Repeat("请帮我查一下明天从北京到上海的航班，最好是上午出发的。\n", 8)},
		{"json", strings.Repeat(`{"city":"San Francisco","dates":["2024-05-01","2024-05-03"],"guests":2},`, 8)},
		{"short", "assistant"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.s)))
			buf := make([]byte, 0, 4*len(tc.s))
			for b.Loop() {
				buf = AppendString(buf[:0], tc.s)
			}
		})
	}
}

// TestAppendStringQuoteWords: eight-byte words holding quotes and
// backslashes in every pattern (each byte plain, '"' or '\\', and '#',
// which a borrow from a quote before it can flag), at every offset from
// the start of the text, beside other bytes that need care, in every room.
func TestAppendStringQuoteWords(t *testing.T) {
	alphabet := []byte{'a', '"', '\\', '#'}
	word := make([]byte, 8)
	for pattern := range 1 << 16 { // two bits per byte
		for k := range word {
			word[k] = alphabet[pattern>>(2*k)&3]
		}
		if pattern%7 != 0 && pattern%61 != 1 { // a spread of the patterns, all of them at offset 0
			checkAppend(t, string(word)+"tail of text")
			continue
		}
		for at := 0; at <= 9; at++ {
			for _, after := range []string{"", "x", "\n", "中", "\"\"\"\"\"\"\"\"\"", "plain words after"} {
				checkAppend(t, strings.Repeat("p", at)+string(word)+after)
			}
		}
	}
}

// checkAppend holds AppendString(s) to Marshal's in each room.
func checkAppend(t *testing.T, s string) {
	t.Helper()
	want, _ := Marshal(s)
	for _, room := range append(appendRooms(s), len(s)+24, len(s)+30) {
		dst := append(make([]byte, 0, 1+room), 'x')
		if got := AppendString(dst, s); string(got) != "x"+string(want) {
			t.Fatalf("%q, room %d: got %s want %s", s, room, got, want)
		}
	}
}

// TestZeroBytes: zeroBytes flags exactly the zero bytes, whatever the
// bytes beside them (no borrow or carry from one byte into another).
func TestZeroBytes(t *testing.T) {
	vals := []byte{0, 1, 0x7f, 0x80, 0x81, 0xff, '"', '\\'}
	for p := range 1 << 24 { // three bits per byte: every pattern
		var w, want uint64
		for k := range 8 {
			v := vals[(p>>(3*k))&7]
			w |= uint64(v) << (8 * k)
			if v == 0 {
				want |= 0x80 << (8 * k)
			}
		}
		if got := zeroBytes(w); got != want {
			t.Fatalf("zeroBytes(%#016x) = %#016x, want %#016x", w, got, want)
		}
	}
}
