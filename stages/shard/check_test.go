package shard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/record"
)

// TestCheckChanged: for records a stage makes from a checked record the
// way stages do (a shallow copy sharing the rest, a deep Clone, lists
// copied, grown or shifted, fields replaced by new valid or invalid text or
// JSON), CheckChanged gives exactly Check's answer, reason and message.
func TestCheckChanged(t *testing.T) {
	bases := append(fixtureRecords(), syntheticRecords(50, 7)...)
	for _, b := range bases {
		if _, err := Check(b); err != nil {
			t.Fatalf("base %s: %v", b.ID, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "plain", "中文", "bad \xff", "\xed\xa0\x80", "trunc \xe4\xb8"}
	jsons := []string{"", `{}`, `{"a":[1,2]}`, `{"a":`, `"x"`, "{\"a\":\"\xff\"}", `nul`}
	text := func() string { return texts[rng.IntN(len(texts))] }
	js := func() json.RawMessage {
		if s := jsons[rng.IntN(len(jsons))]; s != "" {
			return json.RawMessage(s)
		}
		return nil
	}
	mutations := []func(r *record.Record){
		func(r *record.Record) { r.System = text() },
		func(r *record.Record) { r.ID = text() },
		func(r *record.Record) {
			if len(r.Messages) > 0 {
				r.Messages = slices.Clone(r.Messages)
				r.Messages[rng.IntN(len(r.Messages))].Content = text()
			}
		},
		func(r *record.Record) { // text put before a turn's text (decision tokens)
			if len(r.Messages) > 0 {
				r.Messages = slices.Clone(r.Messages)
				k := rng.IntN(len(r.Messages))
				r.Messages[k].Content = text() + r.Messages[k].Content
			}
		},
		func(r *record.Record) { // a turn put in front: every index shifts
			r.Messages = append([]record.Message{{Role: text(), Content: text()}}, r.Messages...)
		},
		func(r *record.Record) {
			r.Messages = append(slices.Clip(r.Messages), record.Message{Role: "tool", Results: []record.Result{{Name: text(), Content: text()}}})
		},
		func(r *record.Record) { // two turns put in between (meta_tool's call and result)
			k := rng.IntN(len(r.Messages) + 1)
			r.Messages = slices.Insert(slices.Clone(r.Messages), k,
				record.Message{Role: "assistant", Calls: []record.Call{{Name: text(), Arguments: js()}}},
				record.Message{Role: "tool", Results: []record.Result{{Name: text(), Content: text()}}})
		},
		func(r *record.Record) { // turns cut from the middle
			if n := len(r.Messages); n > 1 {
				k := rng.IntN(n - 1)
				r.Messages = slices.Delete(slices.Clone(r.Messages), k, k+1+rng.IntN(min(2, n-1-k)))
			}
		},
		func(r *record.Record) {
			for i := range r.Messages {
				if len(r.Messages[i].Calls) > 0 {
					r.Messages = slices.Clone(r.Messages)
					calls := slices.Clone(r.Messages[i].Calls)
					k := rng.IntN(len(calls))
					if rng.IntN(2) == 0 {
						calls[k].Arguments = js()
					} else {
						calls[k].Name = text()
					}
					r.Messages[i].Calls = calls
					return
				}
			}
		},
		func(r *record.Record) {
			for i := range r.Messages {
				if len(r.Messages[i].Results) > 0 {
					r.Messages = slices.Clone(r.Messages)
					res := slices.Clone(r.Messages[i].Results)
					res[rng.IntN(len(res))].Content = text()
					r.Messages[i].Results = res
					return
				}
			}
		},
		func(r *record.Record) {
			if len(r.Tools) > 0 {
				r.Tools = slices.Clone(r.Tools)
				k := rng.IntN(len(r.Tools))
				switch rng.IntN(3) {
				case 0:
					r.Tools[k].Parameters = js()
				case 1:
					r.Tools[k].Response = js()
				default:
					r.Tools[k].Description = text()
				}
			}
		},
		func(r *record.Record) { // a tool put in front
			r.Tools = append([]record.Tool{{Name: text(), Parameters: js()}}, r.Tools...)
		},
		func(r *record.Record) { r.SetTag(text(), text()) },
		func(r *record.Record) { r.AddStep(text(), "rule", text()) },
		func(r *record.Record) { *r = *r.Clone() },
	}
	runs, differ := 0, 0
	for _, base := range bases {
		for range 200 {
			out := *base // shares everything, as a stage's copy does
			out.Tags = slices.Clip(out.Tags)
			out.Lineage = slices.Clip(out.Lineage)
			for range 1 + rng.IntN(3) {
				mutations[rng.IntN(len(mutations))](&out)
			}
			wantReason, wantErr := Check(&out)
			gotReason, gotErr := CheckChanged(&out, base)
			if gotReason != wantReason || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("record %q: CheckChanged = %q, %v; Check = %q, %v", base.ID, gotReason, gotErr, wantReason, wantErr)
			}
			runs++
			if wantErr != nil {
				differ++
			}
		}
	}
	if differ == 0 || differ == runs {
		t.Fatalf("%d of %d changed records unwritable: the mutations test too little", differ, runs)
	}
}

// TestCheckChangedSkipsShared shows what CheckChanged does not look at:
// text and JSON shared with the record it was made from, which must have
// passed Check. (A record that did not is passed through unseen.)
func TestCheckChangedSkipsShared(t *testing.T) {
	unchecked := &record.Record{ID: "x", System: "bad \xff",
		Tools:    []record.Tool{{Name: "t", Parameters: json.RawMessage(`{`)}},
		Messages: []record.Message{{Role: "user", Content: "bad \xff"}}}
	out := *unchecked
	out.Messages = slices.Clone(out.Messages) // the same texts, in a new list
	if reason, err := CheckChanged(&out, unchecked); err != nil {
		t.Errorf("shared text and JSON checked again: %s %v", reason, err)
	}
	if reason, _ := Check(&out); reason != ReasonInvalidUTF8 {
		t.Errorf("Check = %q, want %s", reason, ReasonInvalidUTF8)
	}
	// Turns put in between and tags set among the others do not make the
	// shared turns and tags after them new.
	unchecked.Tags = []record.Tag{{Key: "b", Value: "bad \xff"}}
	out = *unchecked
	out.Messages = slices.Insert(slices.Clone(unchecked.Messages), 0, record.Message{Role: "assistant", Content: "new"}, record.Message{Role: "tool", Content: "new"})
	out.SetTag("a", "new")
	if reason, err := CheckChanged(&out, unchecked); err != nil {
		t.Errorf("shared text after inserted turns or tags checked again: %s %v", reason, err)
	}
	// Text put before a checked text: only the new text is checked (the
	// checked one is found at its end by its bytes).
	unchecked.Messages[0].Content = "bad \xff and long enough to be found at the end"
	out.Messages = slices.Clone(unchecked.Messages)
	out.Messages[0].Content = "<answer>" + unchecked.Messages[0].Content
	if reason, err := CheckChanged(&out, unchecked); err != nil {
		t.Errorf("checked text after a new front checked again: %s %v", reason, err)
	}
	out.Messages[0].Content = "\xff" + unchecked.Messages[0].Content
	if reason, _ := CheckChanged(&out, unchecked); reason != ReasonInvalidUTF8 {
		t.Errorf("CheckChanged of an invalid front = %q, want %s", reason, ReasonInvalidUTF8)
	}
	out.Messages = unchecked.Messages
	out.Tools = []record.Tool{{Name: "t", Parameters: json.RawMessage(`{`)}} // equal bytes, not the same
	out.System = "ok"
	if reason, _ := CheckChanged(&out, unchecked); reason != ReasonInvalidJSON {
		t.Errorf("CheckChanged of new parameters = %q, want %s", reason, ReasonInvalidJSON)
	}
}

// FuzzCheckChanged holds CheckChanged to Check for records made from a
// checked record the way stages make them: the header's texts replaced,
// tags set (new keys among the old, or old keys given new values, as
// record.WithTags does) and a lineage step added.
func FuzzCheckChanged(f *testing.F) {
	f.Add("id-2", "", "lang", "en", "meta_tool", "", 0)
	f.Add("", "sys \xff", "zz", "\xff", "stage", "model", 1)
	f.Add("x", "", "a", "", "", "", 2)
	f.Add("\xed\xa0\x80", "中文", "lang", "中文", "s\xfe", "", 3)
	bases := fixtureRecords()
	for _, b := range bases {
		b.SetTag("lang", "en")
		b.SetTag("source_id", "1")
		b.AddStep("ingest", "", "")
		if _, err := Check(b); err != nil {
			f.Fatalf("base %s: %v", b.ID, err)
		}
	}
	f.Fuzz(func(t *testing.T, id, system, key, value, stage, model string, pick int) {
		base := bases[uint(pick)%uint(len(bases))]
		out := *base
		switch pick % 4 {
		case 0:
			out.ID = id
		case 1:
			out.System = system
		}
		out.Tags = record.WithTags(base.Tags, record.Tag{Key: key, Value: value})
		if pick%3 != 0 {
			out.AddStep(stage, "rule", model)
		}
		wantReason, wantErr := Check(&out)
		gotReason, gotErr := CheckChanged(&out, base)
		if gotReason != wantReason || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("CheckChanged = %q, %v; Check = %q, %v", gotReason, gotErr, wantReason, wantErr)
		}
	})
}

// TestValidUTF8 holds validUTF8 to utf8.ValidString on texts of every
// length up to 20 bytes, ASCII, and with one byte outside ASCII (a lone
// continuation byte, a lead byte, an invalid byte) at each position, and
// on valid multi-byte texts of the lengths its shortcut reads.
func TestValidUTF8(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := validUTF8(s), utf8.ValidString(s); got != want {
			t.Fatalf("validUTF8(%q) = %v, utf8.ValidString %v", s, got, want)
		}
	}
	for n := range 21 {
		ascii := strings.Repeat("a", n)
		check(ascii)
		for i := range n {
			for _, b := range []byte{0x80, 0xc3, 0xff, 0x7f} {
				s := []byte(ascii)
				s[i] = b
				check(string(s))
			}
		}
	}
	for _, s := range []string{"中文", "中文a", "ab中文", "中文中文", "中文中文中", "é", "aé", "aaé", "aaaé", "aaaaaaé", "aaaaaaaaaaaaaaé"} {
		check(s)
	}
}

func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "abcd", "category", "result_mode", "\xffabcdefg", "abcdefgh\xff", "中文中文中"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validUTF8(s), utf8.ValidString(s); got != want {
			t.Fatalf("validUTF8(%q) = %v, utf8.ValidString %v", s, got, want)
		}
	})
}
