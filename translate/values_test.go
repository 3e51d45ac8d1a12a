package translate

import (
	"encoding/json"
	"testing"
)

func TestClassify(t *testing.T) {
	sch := func(s string) schema {
		var m schema
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		schema string
		v      string
		want   leafClass
	}{
		// By schema.
		{`{"type":"string","enum":["rating","price"]}`, "rating", leafEnum},
		{`{"type":"string","enum":["意大利"]}`, "意大利", leafEnum},
		{`{"type":"string","format":"date"}`, "next Monday", leafLocked},
		{`{"type":"string","pattern":"^[A-Z]+$"}`, "some text", leafLocked},
		{`{"const":"fixed text"}`, "fixed text", leafLocked},
		{`{"type":"integer"}`, "twelve apples", leafLocked},
		{`{"type":["string","null"]}`, "a quiet room", leafFree},
		{`{"type":"string"}`, "a quiet room", leafFree},
		// By value.
		{`{}`, "", leafLocked},
		{`{}`, "   ", leafLocked},
		{`{}`, "2024-11-22", leafLocked},
		{`{}`, "08:30", leafLocked},
		{`{}`, "$3.50", leafLocked},
		{`{}`, "+1 (555) 010-2000", leafLocked},
		{`{}`, "12.5", leafLocked},
		{`{}`, "1e3", leafLocked},
		{`{}`, "https://example.com/a b", leafLocked},
		{`{}`, "www.example.com", leafLocked},
		{`{}`, "amy@example.com", leafLocked},
		{`{}`, "USD", leafLocked},
		{`{}`, "AAPL", leafLocked},
		{`{}`, "en", leafLocked},
		{`{}`, "INV12345", leafLocked},
		{`{}`, "HTL-4471", leafLocked},
		{`{}`, "snake_case_id", leafLocked},
		{`{}`, "camelCase", leafLocked},
		{`{}`, "report.pdf", leafLocked},
		{`{}`, "/usr/local/bin", leafLocked},
		{`{}`, "true", leafLocked},
		{`{}`, "USD EUR", leafLocked},
		{`{}`, "SELECT id FROM t1", leafLocked},
		{`{}`, "SELECT * FROM users", leafFree}, // a plain word makes it text
		{`{}`, "chicken", leafFree},
		{`{}`, "Paris", leafFree},
		{`{}`, "New York", leafFree},
		{`{}`, "sci-fi", leafFree},
		{`{}`, "Python 3.11", leafFree},
		{`{}`, "Je suis très heureux", leafFree},
		{`{}`, "约翰·多伊", leafFree},
		{`{}`, "2022年5月15日", leafFree},
		{`{}`, "Hello, world!", leafFree},
		{`{}`, "a@b", leafLocked},
		// JSON text, walked as JSON unless the schema fixes or locks the
		// string.
		{`{}`, `{"城市": "北京", "code": "AX9"}`, leafJSON},
		{`{"type":"string"}`, ` ["软件", {"n": 2}]`, leafJSON},
		{`{}`, `{"code": "AX9"}`, leafJSON},
		{`{"type":"string","format":"json"}`, `{"城市": "北京"}`, leafLocked},
		{`{"type":"string","enum":["{}"]}`, `{"城市": "北京"}`, leafFree},
		{`{}`, `{"城市": 北京}`, leafFree}, // not JSON
	}
	for _, c := range cases {
		if got := classify(sch(c.schema), c.v); got != c.want {
			t.Errorf("classify(%s, %q) = %d, want %d", c.schema, c.v, got, c.want)
		}
	}
	if got := classify(nil, "free words here"); got != leafFree {
		t.Errorf("nil schema: %d", got)
	}
}

func TestSchemaNavigation(t *testing.T) {
	var s schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},
		"pair":{"type":"array","prefixItems":[{"format":"date"},{"type":"string"}]},
		"old":{"type":"array","items":[{"format":"email"}]},
		"extra":{"type":"object","additionalProperties":{"enum":["x"]}}}}`), &s); err != nil {
		t.Fatal(err)
	}
	if classify(item(property(s, "tags"), 3), "a") != leafEnum {
		t.Error("items schema not applied")
	}
	if classify(item(property(s, "pair"), 0), "soon") != leafLocked || classify(item(property(s, "pair"), 1), "soon enough") != leafFree {
		t.Error("prefixItems not applied")
	}
	if classify(item(property(s, "old"), 0), "someone at home") != leafLocked || item(property(s, "old"), 1) != nil {
		t.Error("draft-04 tuple items not applied")
	}
	if classify(property(property(s, "extra"), "anything"), "x") != leafEnum {
		t.Error("additionalProperties not applied")
	}
	if property(nil, "a") != nil || item(nil, 0) != nil {
		t.Error("nil schema navigation")
	}
}

func TestWalkerCompare(t *testing.T) {
	var s schema
	_ = json.Unmarshal([]byte(`{"properties":{"unit":{"enum":["c","f"]},"list":{"items":{"type":"string"}}}}`), &s)
	cases := []struct {
		orig, ans string
		reasons   []string
		free      int
	}{
		{`{"unit":"c","list":["red apple","green pear"],"n":1}`, `{"list":["紅蘋果","綠梨"],"n":1.0,"unit":"c"}`, nil, 2},
		{`{"unit":"c"}`, `{"unit":"f"}`, []string{ReasonEnumChanged}, 0},
		{`{"unit":"c"}`, `{"unit":"c","unit":"c"}`, []string{ReasonKeyChanged}, 0},
		{`{"list":["a b c"]}`, `{"list":["甲","乙"]}`, []string{ReasonValueChanged}, 0},
		{`{"n":true}`, `{"n":false}`, []string{ReasonValueChanged}, 0},
		{`{"n":null}`, `{"n":"無"}`, []string{ReasonValueChanged}, 0},
		{`{"o":{"id":"X-1"}}`, `{"o":{"id":"X-2","note":"新"}}`, []string{ReasonValueChanged, ReasonKeyChanged}, 0},
		// A string holding JSON text is compared as JSON: keys stay, locked
		// values are copied, free text may be translated.
		{`{"p":"{\"note\": \"bring the slides\", \"code\": \"AX9\"}"}`, `{"p":"{\"note\":\"帶投影片\",\"code\":\"AX9\"}"}`, nil, 1},
		{`{"p":"{\"note\": \"bring the slides\", \"code\": \"AX9\"}"}`, `{"p":"{\"備註\": \"帶投影片\", \"code\": \"AX9\"}"}`, []string{ReasonKeyChanged, ReasonKeyChanged}, 0},
		{`{"p":"{\"note\": \"bring the slides\", \"code\": \"AX9\"}"}`, `{"p":"{\"note\": \"帶投影片\", \"code\": \"AX8\"}"}`, []string{ReasonValueChanged}, 1},
		{`{"p":"{\"note\": \"bring the slides\", \"code\": \"AX9\"}"}`, `{"p":"備註：帶投影片，代碼 AX9"}`, []string{ReasonValueChanged}, 0},
		{`{"p":"[\"urgent review\", {\"n\": 2}]"}`, `{"p":"[\"緊急審查\", {\"n\": 3}]"}`, []string{ReasonValueChanged}, 1},
		{`{"p":"{\"code\": \"AX9\"}"}`, `{"p":"{\"code\": \"AX9\"}"}`, nil, 0}, // locked as a whole
	}
	for _, c := range cases {
		o, err1 := parseTree([]byte(c.orig))
		a, err2 := parseTree([]byte(c.ans))
		if err1 != nil || err2 != nil {
			t.Fatal(c.orig, c.ans)
		}
		w := walker{keyReason: ReasonKeyChanged}
		w.compare("args", o, a, s)
		var got []string
		for _, p := range w.problems {
			got = append(got, p.reason)
		}
		if len(got) != len(c.reasons) || len(w.allFree()) != c.free {
			t.Errorf("%s vs %s: problems %v (%v), free %d; want %v, %d", c.orig, c.ans, got, w.problems, len(w.allFree()), c.reasons, c.free)
			continue
		}
		for i := range got {
			if got[i] != c.reasons[i] {
				t.Errorf("%s vs %s: problems %v, want %v", c.orig, c.ans, got, c.reasons)
			}
		}
	}
}
