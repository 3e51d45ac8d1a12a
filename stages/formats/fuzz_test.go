package formats

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// fuzzParse checks, for any row: no panic; failures are *contract.Reject; a
// record satisfies the invariants later stages rely on and reads the same
// twice; a row Parse accepts is framed (ingest trusts a row cut at the
// separator when Parse accepts it, see Scanner.SetQuick).
func fuzzParse(f *testing.F, format, fixture string, seeds ...string) {
	other := fixtureRows(f, fixture)
	for _, row := range fixtureRows(f, fixture) {
		f.Add(string(row))
		// The first string value damaged: bytes that are not UTF-8 and a
		// lone surrogate escape, which the record must not keep.
		f.Add(damageFirstString(string(row)))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, row string) {
		sameEveryWay(t, format, row)
		rec := checkParsed(t, format, row)
		if rec == nil {
			return
		}
		if strings.HasPrefix(row, "{") && strings.HasSuffix(row, "}") && !Framed([]byte(row)) {
			t.Fatal("Parse accepts a row the full scan does not frame as one object")
		}
		a, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		// Read again from bytes cleared afterwards, as ingest reuses its
		// batch's: the record holds no view of the row.
		data := []byte(row)
		again, _ := Parse(format, "f", 1, data)
		clear(data)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Fatal("two reads differ (or the second record holds a view of its row's bytes)")
		}
		// The first record shares no buffer that Parse reuses.
		for i, o := range other {
			Parse(format, "f", int64(i), o)
		}
		if a2, _ := json.Marshal(rec); string(a2) != string(a) {
			t.Fatal("the first record changed when the row was read again")
		}
	})
}

// damageFirstString puts bytes that are not UTF-8 and a lone surrogate
// escape at the start of the row's first string member value.
func damageFirstString(row string) string {
	for _, sep := range []string{`": "`, `":"`} {
		if i := strings.Index(row, sep); i >= 0 {
			i += len(sep)
			return row[:i] + "\xff\xed\xa0\x80\\udc80" + row[i:]
		}
	}
	return row
}

func FuzzParseToolACE(f *testing.F) {
	fuzzParse(f, "toolace", "toolace.json",
		taRow(taSystem(taTools), "user", "q", "assistant", `[Tide Table(harbour="Rock"), now()]`, "tool", `[{"name": "now", "results": 1}, {"name": "Tide Table", "results": {}}]`),
		taRow("x [{\"name\": \"now\"}] y", "user", "q", "assistant", "[now(a=[1, {'b': (2,)}])]"))
}

func FuzzParseGlaive(f *testing.F) {
	sys := gLead + gTool + "\n"
	fuzzParse(f, "glaive", "glaive.jsonl",
		gRow(sys, "USER: Find Dune.", gCall(`'{"title": "Ender\'s"}'`), `FUNCTION RESPONSE: {"a": 1}`, "ASSISTANT: ok <|endoftext|>"),
		gRow(sys, "USER: x <|endoftext|>", "USER: y", "ASSISTANT: z <|endoftext|>", "ASSISTANT: w\nAI to= find_book: {\"title\": \"D\"} <|endoftext|>"),
		gRow(sys, "USER: x", `ASSISTANT: <functioncall> {"name": "find_book", "parameters": {"title": "D"}}} <|endoftext|>`))
}

func FuzzParseXLAM(f *testing.F) {
	fuzzParse(f, "xlam", "xlam.json",
		rowJSON("id", 1, "query", "q", "answers", `[{"name": "bmi", "arguments": "{\"weight\": 1}"}]`, "tools", xTools))
}

func FuzzParseShareGPT(f *testing.F) {
	fuzzParse(f, "sharegpt", "sharegpt.json",
		sRow(sTools, turn{"from": "human", "value": "q"}, turn{"from": "function_call", "value": `[{"name": "hold", "arguments": {"isbn": "1"}}, {"name": "hold", "arguments": {}}]`},
			turn{"from": "observation", "value": `[{"name": "hold", "content": 1}, 2]`}))
}

func FuzzParseOpenAI(f *testing.F) {
	fuzzParse(f, "openai", "openai.jsonl",
		oRow(msg{"role": "user", "content": "x"}, msg{"role": "assistant", "tool_calls": []msg{oCall("a", "k"), oCall("b", "s")}},
			msg{"role": "tool", "tool_call_id": "b", "content": "1"}, msg{"role": "tool", "tool_call_id": "a", "content": "2"}))
}

func TestUnknownFormat(t *testing.T) {
	_, err := Parse("csv", "s", 0, []byte(`{}`))
	var pe *contract.Reject
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("got %v, want a plain error", err)
	}
	for _, f := range Formats() {
		if _, err := Parse(f, "s", 0, []byte(`[]`)); !errors.As(err, &pe) || pe.Reason != "row_not_object" {
			t.Errorf("%s: got %v", f, err)
		}
	}
}

// checkParsed is the property every parse fuzz target checks: a failure is
// a *contract.Reject with a reason; a record (returned) satisfies the invariants.
func checkParsed(t *testing.T, format, row string) *record.Record {
	rec, err := Parse(format, "f", 1, []byte(row))
	if err != nil {
		var pe *contract.Reject
		if !errors.As(err, &pe) || pe.Reason == "" {
			t.Fatalf("error %v is not a *contract.Reject with a reason", err)
		}
		return nil
	}
	if err := checkInvariants(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// FuzzGlaiveText mutates the system and chat texts themselves, where the
// glaive reader's own grammar lives.
func FuzzGlaiveText(f *testing.F) {
	for _, row := range fixtureRows(f, "glaive.jsonl") {
		var r struct{ System, Chat string }
		if err := json.Unmarshal(row, &r); err != nil {
			f.Fatal(err)
		}
		f.Add(r.System, r.Chat)
	}
	sys := gLead + gTool + "\n"
	f.Add(sys, "USER: a <|endoftext|>\n\nUSER: b\n\nASSISTANT: c\n<functioncall> {\"name\": \"find_book\", \"arguments\": '{\"title\": \"it\\'s\"}'}} <|endoftext|>\n\nFUNCTION RESPONSE: {\"a\": [1")
	f.Add(sys, "USER: x\n\n\nASSISTANT: y\nAI to= find-book: {\"title\": 1} <|endoftext|>\n\n\nFUNCTION RESPONSE: ok\nASSISTANT: z <|endoftext|>")
	f.Fuzz(func(t *testing.T, system, chat string) {
		row := rowJSON("system", system, "chat", chat)
		sameEveryWay(t, "glaive", row)
		checkParsed(t, "glaive", row)
	})
}

// FuzzToolACETools mutates the tool list in ToolACE's system template,
// which the direct reader and the tree must read alike (sameEveryWay).
func FuzzToolACETools(f *testing.F) {
	f.Add(taTools)
	f.Add(`[{"name": "a", "description": "生成\"x\"", "parameters": {"type": "dict", "properties": {"l": {"type": "array", "items": {"type": "str"}, "default": [1.50, null]}}, "required": ["l"]}, "required": null}]`)
	f.Add(`[{"name": "b", "parameters": {"type": "object", "properties": {"o": {"anyOf": [{"type": "int, optional"}, false]}}, "required": null}}]`)
	f.Fuzz(func(t *testing.T, tools string) {
		row := taRow(taSystem(tools), "user", "q", "assistant", "[now()]")
		sameEveryWay(t, "toolace", row)
		checkParsed(t, "toolace", row)
	})
}

// FuzzToolACETurns mutates an assistant value and the tool turn answering
// it, which the reader without a tree (flatResults) and the tree must read
// alike (sameEveryWay).
func FuzzToolACETurns(f *testing.F) {
	f.Add(`[Tide Table(harbour="Rock"), now()]`, `[{"name": "now", "results": 1}, {"name": "Tide Table", "results": {"a": [1]}}]`)
	f.Add(`[now(x=[1, (2,), {'a': None}])]`, `{"name": "now", "results": "x"}`)
	f.Add(`[Note (a) b]`, `[]`)
	f.Add(`[Tide Table(harbour="Rock"), now()]`, ` [{"results": "{\"a\": 1}", "name": "now"}, {"name": "Tide\u0020Table", "results": {"a": 1, "a": 2}}] `)
	f.Fuzz(func(t *testing.T, assistant, tool string) {
		row := taRow(taSystem(taTools), "user", "q", "assistant", assistant, "tool", tool)
		sameEveryWay(t, "toolace", row)
		checkParsed(t, "toolace", row)
	})
}

// sameEveryWay checks that a row gives the same record, or the same reject
// (reason and detail), however parse reads the JSON texts it holds (see
// passes): xlam's in the row parser's pass or in passes of their own, and
// xlam's, glaive's and ToolACE's tools straight into the record or
// through a tree.
func sameEveryWay(t *testing.T, format, row string) {
	t.Helper()
	two, err2 := parse(format, "f", 1, []byte(row), twoPasses)
	b, _ := json.Marshal(two)
	// laidOut twice: the second parse (in the same workspace, as a rule)
	// takes the tools the first read from laidTool's memo.
	for _, how := range []passes{onePass, direct, laidOut, laidOut} {
		one, err1 := parse(format, "f", 1, []byte(row), how)
		a, _ := json.Marshal(one)
		if fmt.Sprintf("%#v", err1) != fmt.Sprintf("%#v", err2) || string(a) != string(b) {
			t.Fatalf("passes %d: %s, %#v\ntwo passes: %s, %#v", how, a, err1, b, err2)
		}
	}
}
