package verify

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/record"
)

func call(name, args string) record.Call {
	return record.Call{Name: name, Arguments: json.RawMessage(args)}
}

func TestMatchCalls(t *testing.T) {
	tests := []struct {
		name       string
		gold, pred []record.Call
		ok         bool
		pairs      [][2]int
		want       []string // kind@path
	}{
		{"identical", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris"}`)},
			true, [][2]int{{0, 0}}, nil},
		{"key order and white space", []record.Call{call("get_weather", `{"city":"Paris","days":2}`)}, []record.Call{call("get_weather", `{ "days": 2, "city": "Paris" }`)},
			true, [][2]int{{0, 0}}, nil},
		{"1 equals 1.0", []record.Call{call("get_weather", `{"city":"Paris","days":2}`)}, []record.Call{call("get_weather", `{"city":"Paris","days":2.0}`)},
			true, [][2]int{{0, 0}}, nil},
		{"numeric string where the schema says integer", []record.Call{call("get_weather", `{"city":"Paris","days":2}`)}, []record.Call{call("get_weather", `{"city":"Paris","days":"2"}`)},
			true, [][2]int{{0, 0}}, nil},
		{"numeric string where the schema says string", []record.Call{call("get_weather", `{"city":"75001"}`)}, []record.Call{call("get_weather", `{"city":75001}`)},
			false, nil, []string{"value_error@pred[0].arguments.city"}},
		{"numeric string for an unknown tool", []record.Call{call("other", `{"n":2}`)}, []record.Call{call("other", `{"n":"2"}`)},
			false, nil, []string{"value_error@pred[0].arguments.n"}},
		{"boolean string where the schema says boolean", []record.Call{call("get_weather", `{"city":"Paris","detailed":true}`)}, []record.Call{call("get_weather", `{"city":"Paris","detailed":"True"}`)},
			true, [][2]int{{0, 0}}, nil},
		{"free text: case and white space folded", []record.Call{call("get_weather", `{"city":"New York"}`)}, []record.Call{call("get_weather", `{"city":"  new   york "}`)},
			true, [][2]int{{0, 0}}, nil},
		{"enum spelled exactly", []record.Call{call("get_weather", `{"city":"Paris","unit":"fahrenheit"}`)}, []record.Call{call("get_weather", `{"city":"Paris","unit":"Fahrenheit"}`)},
			false, nil, []string{"value_error@pred[0].arguments.unit"}},
		{"omitted argument equals the default", []record.Call{call("get_weather", `{"city":"Paris","unit":"celsius","days":1}`)}, []record.Call{call("get_weather", `{"city":"Paris"}`)},
			true, [][2]int{{0, 0}}, nil},
		{"added argument equals the default", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris","days":1}`)},
			true, [][2]int{{0, 0}}, nil},
		{"string default of an integer parameter (ToolACE)", []record.Call{call("Market Trends API", `{"trend_type":"X"}`)}, []record.Call{call("Market Trends API", `{"trend_type":"X","count":5}`)},
			true, [][2]int{{0, 0}}, nil},
		{"null equals omitted", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris","tags":null}`)},
			true, [][2]int{{0, 0}}, nil},
		{"nested objects and arrays", []record.Call{call("get_weather", `{"city":"P","legs":[{"from":"A","to":"B"}]}`)}, []record.Call{call("get_weather", `{"city":"P","legs":[{"to":"b","from":"a"}]}`)},
			true, [][2]int{{0, 0}}, nil},
		{"array order matters", []record.Call{call("get_weather", `{"city":"P","tags":["a","b"]}`)}, []record.Call{call("get_weather", `{"city":"P","tags":["b","a"]}`)},
			false, nil, []string{"value_error@pred[0].arguments.tags[0]"}},
		{"parallel calls in another order", []record.Call{call("get_weather", `{"city":"Paris"}`), call("get_weather", `{"city":"Rome"}`), call("get_random_joke", `{}`)},
			[]record.Call{call("get_random_joke", `{}`), call("get_weather", `{"city":"Rome"}`), call("get_weather", `{"city":"Paris"}`)},
			true, [][2]int{{0, 2}, {1, 1}, {2, 0}}, nil},

		{"wrong function", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_random_joke", `{}`)},
			false, nil, []string{"func_error@pred[0].name"}},
		{"missing parameter", []record.Call{call("get_weather", `{"city":"Paris","days":3}`)}, []record.Call{call("get_weather", `{"city":"Paris"}`)},
			false, nil, []string{"param_missing@pred[0].arguments.days"}},
		{"missing parameter that differs from the default", []record.Call{call("get_weather", `{"city":"Paris","unit":"fahrenheit"}`)}, []record.Call{call("get_weather", `{"city":"Paris"}`)},
			false, nil, []string{"param_missing@pred[0].arguments.unit"}},
		{"hallucinated unknown parameter", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris","country":"FR"}`)},
			false, nil, []string{"hallucination@pred[0].arguments.country"}},
		{"hallucinated declared parameter", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris","days":5}`)},
			false, nil, []string{"hallucination@pred[0].arguments.days"}},
		{"wrong value", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"London"}`)},
			false, nil, []string{"value_error@pred[0].arguments.city"}},
		{"stop early", []record.Call{call("get_weather", `{"city":"Paris"}`), call("get_weather", `{"city":"Rome"}`)}, []record.Call{call("get_weather", `{"city":"Rome"}`)},
			false, [][2]int{{1, 0}}, []string{"stop_early@gold[0]"}},
		{"no prediction", []record.Call{call("get_weather", `{"city":"Paris"}`)}, nil,
			false, nil, []string{"stop_early@gold[0]"}},
		{"extra call", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":"Paris"}`), call("get_random_joke", `{}`)},
			false, [][2]int{{0, 0}}, []string{"func_error@pred[1]"}},
		{"bad predicted JSON", []record.Call{call("get_weather", `{"city":"Paris"}`)}, []record.Call{call("get_weather", `{"city":`)},
			false, nil, []string{"bad_json@pred[0].arguments"}},
		{"bad gold JSON", []record.Call{call("get_weather", `[]`)}, []record.Call{call("get_weather", `{"city":"Paris"}`)},
			false, nil, []string{"bad_json@gold[0].arguments"}},
		{"several kinds in one pair", []record.Call{call("get_weather", `{"city":"Paris","days":3}`)}, []record.Call{call("get_weather", `{"city":"Rome","x":1}`)},
			false, nil, []string{"value_error@pred[0].arguments.city", "param_missing@pred[0].arguments.days", "hallucination@pred[0].arguments.x"}},
		{"nothing on either side", nil, nil, true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := MatchCalls(weatherTools, tt.gold, tt.pred)
			if m.OK != tt.ok || !slices.Equal(m.Pairs, tt.pairs) || !slices.Equal(kinds(m.Problems), tt.want) {
				t.Fatalf("got ok=%v pairs=%v problems=%v\nwant ok=%v pairs=%v problems=%v\n%v", m.OK, m.Pairs, kinds(m.Problems), tt.ok, tt.pairs, tt.want, m.Problems)
			}
			for _, p := range m.Problems {
				if p.Check != "match" || p.Msg == "" {
					t.Errorf("bad problem %+v", p)
				}
			}
		})
	}
}

// An exact match is never traded for two near matches.
func TestMatchCallsPrefersExactPairs(t *testing.T) {
	gold := []record.Call{call("get_weather", `{"city":"Paris","days":2}`), call("get_weather", `{"city":"Rome","days":3}`)}
	pred := []record.Call{call("get_weather", `{"city":"Rome","days":2}`), call("get_weather", `{"city":"Paris","days":2}`)}
	m := MatchCalls(weatherTools, gold, pred)
	if !slices.Equal(m.Pairs, [][2]int{{0, 1}}) {
		t.Fatalf("pairs %v, want gold 0 with pred 1", m.Pairs)
	}
	if want := []string{"value_error@pred[0].arguments.days"}; !slices.Equal(kinds(m.Problems), want) {
		t.Errorf("problems %v, want %v", kinds(m.Problems), want)
	}
}

func TestMatchCallsMessages(t *testing.T) {
	items := make([]string, 30)
	for i := range items {
		items[i] = fmt.Sprintf("item%d", i)
	}
	gold, _ := json.Marshal(items)
	items[29] = "itemX"
	pred, _ := json.Marshal(items)
	note := "Please summarise the quarterly report for the board and highlight the revenue figures for Q3"
	nfc, nfd := "Z\u00fcrich", "Zu\u0308rich"
	tests := []struct {
		name, gold, pred, path, msg string
	}{
		{"scalar", `{"city":"Paris"}`, `{"city":"London"}`, "pred[0].arguments.city",
			`parameter "city" of "get_weather" is "London" where gold has "Paris"`},
		// QA F4: both sides were clipped to the same 80 characters and the
		// path named the top-level key only.
		{"long array, last element", `{"city":"P","tags":` + string(gold) + `}`, `{"city":"P","tags":` + string(pred) + `}`,
			"pred[0].arguments.tags[29]", `parameter "tags" of "get_weather" differs at tags[29]: "itemX" where gold has "item29"`},
		{"long string, last character", `{"city":"` + note + `"}`, `{"city":"` + note[:len(note)-1] + `4"}`,
			"pred[0].arguments.city", `parameter "city" of "get_weather" is …` + note[len(note)-78:len(note)-1] + `4" where gold has …` + note[len(note)-78:] + `"`},
		{"nested object", `{"city":"P","legs":[{"from":"A","to":"B"},{"from":"B","to":"C"}]}`, `{"city":"P","legs":[{"from":"A","to":"B"},{"from":"B","to":"D"}]}`,
			"pred[0].arguments.legs[1].to", `parameter "legs" of "get_weather" differs at legs[1].to: "D" where gold has "C"`},
		{"absent nested key", `{"city":"P","legs":[{"from":"A","to":"B"}]}`, `{"city":"P","legs":[{"from":"A"}]}`,
			"pred[0].arguments.legs[0].to", `parameter "legs" of "get_weather" differs at legs[0].to: absent where gold has "B"`},
		{"key with a space", `{"city":"P","legs":[{"departure date":"2024-01-02"}]}`, `{"city":"P","legs":[{"departure date":"2024-01-03"}]}`,
			`pred[0].arguments.legs[0]["departure date"]`, `parameter "legs" of "get_weather" differs at legs[0]["departure date"]: "2024-01-03" where gold has "2024-01-02"`},
		{"Unicode normalisation", `{"city":"` + nfc + `"}`, `{"city":"` + nfd + `"}`, "pred[0].arguments.city",
			"parameter \"city\" of \"get_weather\" is \"Zu\u0308rich\" where gold has \"Z\u00fcrich\" (the same text in another Unicode normalisation: NFD where gold is NFC)"},
	}
	// A difference in the middle of a long value shows on both sides,
	// cut around it.
	long := strings.Repeat("abcdefghij", 30)
	m := MatchCalls(weatherTools, []record.Call{call("get_weather", `{"city":"`+long+`"}`)},
		[]record.Call{call("get_weather", `{"city":"`+long[:150]+"#"+long[151:]+`"}`)})
	if msg := m.Problems[0].Msg; !strings.Contains(msg, "ghij#bcd") || !strings.Contains(msg, "ghijabcd") || strings.Count(msg, "…") != 4 {
		t.Errorf("middle difference: %s", msg)
	}
	for _, tt := range tests {
		m := MatchCalls(weatherTools, []record.Call{call("get_weather", tt.gold)}, []record.Call{call("get_weather", tt.pred)})
		if len(m.Problems) != 1 {
			t.Errorf("%s: problems %v", tt.name, m.Problems)
			continue
		}
		if p := m.Problems[0]; p.Path != tt.path || p.Msg != tt.msg {
			t.Errorf("%s:\n got  %s: %s\n want %s: %s", tt.name, p.Path, p.Msg, tt.path, tt.msg)
		}
		if n := utf8.RuneCountInString(m.Problems[0].Msg); n > 300 {
			t.Errorf("%s: message of %d characters", tt.name, n)
		}
	}
}

func FuzzMatchCalls(f *testing.F) {
	f.Add(`{"city":"Paris","days":2}`, `{"city":"paris","days":"2.0"}`, "get_weather", "get_weather")
	f.Add(`{"legs":[{"from":"A"}]}`, `{"legs":[{"from":"A","to":null}]}`, "get_weather", "x")
	f.Fuzz(func(t *testing.T, ga, pa, gn, pn string) {
		gold := []record.Call{call(gn, ga), call("get_weather", `{"city":"Paris"}`)}
		pred := []record.Call{call(pn, pa)}
		m := MatchCalls(weatherTools, gold, pred)
		if m.OK {
			t.Fatal("one prediction cannot match two gold calls")
		}
		self := MatchCalls(weatherTools, gold[:1], gold[:1])
		if _, err := decodeArgs(json.RawMessage(ga)); err == nil && !self.OK {
			t.Fatalf("a call does not match itself: %v", self.Problems)
		}
	})
}

func BenchmarkMatchCalls(b *testing.B) {
	var gold, pred []record.Call
	for i := range 4 {
		gold = append(gold, call("get_weather", fmt.Sprintf(`{"city":"City %d","days":%d,"unit":"celsius"}`, i, i+1)))
		pred = append(pred, call("get_weather", fmt.Sprintf(`{"unit":"celsius","days":%d.0,"city":"city %d"}`, 4-i, 3-i)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if m := MatchCalls(weatherTools, gold, pred); !m.OK {
			b.Fatal(m.Problems)
		}
	}
}

// Numbers compare exactly (QA F5: a float64 fallback took different
// integers beyond 64 bits, or an integer and a float beyond 2^53, for
// equal).
func TestNumberEqual(t *testing.T) {
	tests := []struct {
		a, b string
		eq   bool
	}{
		{"5", "5.0", true}, {"5", "5e0", true}, {"5", "0.5e1", true}, {"500", "5E2", true}, {"5", "5.000", true},
		{"0", "-0", true}, {"0.0", "0e10", true}, {"-0.0", "0", true}, {"1.50", "1.5", true}, {"0.001", "1e-3", true},
		{" 5", "5", true}, {"+5", "5", true}, {"05", "5", true},
		{"12345678901234567890", "12345678901234567891", false},
		{"12345678901234567890", "12345678901234567890.0", true},
		{"9007199254740993", "9007199254740992.0", false},
		{"9007199254740993", "9007199254740993.000", true},
		{"0.1", "0.10000000000000001", false},
		{"1e400", "1e400", true}, {"1e400", "1e401", false}, {"1e400", "10e399", true},
		{"5", "-5", false}, {"1", "2", false}, {"1e999999999999999999", "1e999999999999999998", false},
		// Exponents of any length are exact (QA: past 16 characters they
		// went to float64, which took 1e-99999999999999999 for 0), and an
		// exponent has one sign.
		{"1e-99999999999999999", "0", false}, {"1e-99999999999999999", "2e-99999999999999999", false},
		{"1e-99999999999999999", "10e-100000000000000000", true}, {"1e+0000000000000000000005", "100000", true},
		{"1e+-5", "0.00001", false}, {"1e-+5", "0.00001", false},
		{"0x1p4", "16", true}, {"NaN", "NaN", true}, {"NaN", "nan", false}, {"Inf", "inf", false}, {"", "0", false},
	}
	for _, tt := range tests {
		if got := numberEqual(json.Number(tt.a), json.Number(tt.b)); got != tt.eq {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.eq)
		}
		if got := numberEqual(json.Number(tt.b), json.Number(tt.a)); got != tt.eq {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.eq)
		}
	}
	big := func(arg string) []record.Call { return []record.Call{call("get_order", `{"order_id":`+arg+`}`)} }
	if m := MatchCalls(nil, big("12345678901234567890"), big("12345678901234567891")); m.OK {
		t.Error("MatchCalls: 12345678901234567890 matches 12345678901234567891")
	}
	if m := MatchCalls(nil, big("9007199254740993"), big("9007199254740992.0")); m.OK {
		t.Error("MatchCalls: 9007199254740993 matches 9007199254740992.0")
	}
	if m := MatchCalls(nil, big("5"), big("5.0")); !m.OK {
		t.Errorf("MatchCalls: 5 does not match 5.0: %v", m.Problems)
	}
}

// FuzzDecimalOf: two spellings of a number decimalOf reads are equal
// exactly when their values are, checked against big.Rat where the
// exponent is small enough for it.
func FuzzDecimalOf(f *testing.F) {
	for _, s := range []string{"5", "5.0", "-0", "1e3", "0.001", "12345678901234567890", "+.5", "5.", "1e-400"} {
		f.Add(s, "5")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, okA := decimalOf(a)
		db, okB := decimalOf(b)
		smallExp := func(s string) bool { // big.Rat expands 1e-99999999 in full
			_, e, ok := strings.Cut(strings.ToLower(s), "e")
			return !ok || len(strings.TrimLeft(e, "+-0")) <= 3
		}
		if !okA || !okB || len(a) > 64 || len(b) > 64 || !smallExp(a) || !smallExp(b) {
			return
		}
		ra, ok1 := new(big.Rat).SetString(strings.TrimPrefix(strings.TrimSpace(a), "+"))
		rb, ok2 := new(big.Rat).SetString(strings.TrimPrefix(strings.TrimSpace(b), "+"))
		if !ok1 || !ok2 {
			return // a spelling big.Rat does not read ("5.", ".5e")
		}
		if (da == db) != (ra.Cmp(rb) == 0) {
			t.Fatalf("%q vs %q: decimals %+v %+v, rationals %v %v", a, b, da, db, ra, rb)
		}
	})
}
