package shard

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/swar"
	"github.com/augmentdata/augment/stages/record"
)

// validCases are inputs on every branch of ValidJSON; the test checks each
// against encoding/json.Valid, whose answer ValidJSON must give.
var validCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`,
	`[1,2,3]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `{`, `}`, `[}`, `{]`, `[[[]]]`, `[[[]]`, `{"a":{"b":[{"c":null}]}}`,
	`"x"`, `"`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9\uD83D\uDE00"`, `"\u12"`, `"\u12G4"`, `"\x"`,
	"\"a\tb\"", "\"a\nb\"", "\"\x7f\"", "\"\xff\xfe\"", "\"caf\xc3\xa9\"", `"é"`,
	`true`, `false`, `null`, `tru`, `truex`, `nul`, `True`, `[true,false,null]`, `[truefalse]`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `1.5e3`, `-1.5E-3`, `1x`,
	`123456789012345678901234567890`, `[0,-0.0,1e400]`, ` 1 `, "\t\r\n1\n", "1 2", `{"a":1}{}`, `{"a":1} x`,
	`{"a":"b","c":[1,{"d":"e"}],"f":true}`, `{"":""}`, `{"a":1,"a":2}`, "\x00", "[\x00]", `[1,"2",[3],{"4":5}]`,
	strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth),
	strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1),
	strings.Repeat("[", maxNestingDepth) + "{}" + strings.Repeat("]", maxNestingDepth),
	strings.Repeat(`{"a":`, maxNestingDepth) + "1" + strings.Repeat("}", maxNestingDepth),
	strings.Repeat(`{"a":`, maxNestingDepth+1) + "1" + strings.Repeat("}", maxNestingDepth+1),
}

func TestValidJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := ValidJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("ValidJSON(%.60q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

// FuzzValidJSON holds ValidJSON to encoding/json.Valid's answer.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidJSON(b), json.Valid(b); got != want {
			t.Fatalf("ValidJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON compares ValidJSON with json.Valid on the JSON fields
// of the record sets (parameters and arguments).
func BenchmarkValidJSON(b *testing.B) {
	for _, impl := range []struct {
		name  string
		valid func([]byte) bool
	}{{"ValidJSON", ValidJSON}, {"json.Valid", json.Valid}} {
		b.Run(impl.name, func(b *testing.B) {
			forEachSet(b, func(b *testing.B, recs []*record.Record) {
				var fields [][]byte
				var size int64
				for _, r := range recs {
					for _, t := range r.Tools {
						fields = append(fields, t.Parameters)
					}
					for _, m := range r.Messages {
						for _, c := range m.Calls {
							fields = append(fields, c.Arguments)
						}
					}
				}
				for _, f := range fields {
					size += int64(len(f))
				}
				b.SetBytes(size)
				for b.Loop() {
					for _, f := range fields {
						if !impl.valid(f) {
							b.Fatal("invalid")
						}
					}
				}
			})
		})
	}
}

// TestSpecialIn holds the word-at-a-time test (swar.StringSpecial) to plainByte: every byte
// value at every position of words of plain bytes, and random words.
func TestSpecialIn(t *testing.T) {
	slow := func(w uint64) bool {
		for k := range 8 {
			if !plainByte[byte(w>>(8*k))] {
				return true
			}
		}
		return false
	}
	for _, fill := range []byte{'a', 0x20, 0x7f, 0x80, 0xff, '"' + 1, '\\' - 1} {
		for pos := range 8 {
			for c := range 256 {
				var w uint64
				for k := range 8 {
					b := fill
					if k == pos {
						b = byte(c)
					}
					w |= uint64(b) << (8 * k)
				}
				if got, want := swar.StringSpecial(w) != 0, slow(w); got != want {
					t.Fatalf("StringSpecial(%#016x) != 0 is %v, want %v", w, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		w := rng.Uint64()
		if got, want := swar.StringSpecial(w) != 0, slow(w); got != want {
			t.Fatalf("StringSpecial(%#016x) != 0 is %v, want %v", w, got, want)
		}
	}
}
