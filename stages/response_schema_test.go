package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func schemaOf(content string) string {
	var buf bytes.Buffer
	deriveSchema(content).write(&buf)
	return buf.String()
}

func TestDeriveSchema(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"string", `"ok"`, `{"type":"string"}`},
		{"integer", `42`, `{"type":"integer"}`},
		{"negative integer", `-7`, `{"type":"integer"}`},
		{"number", `4.5`, `{"type":"number"}`},
		{"exponent is a number", `1e3`, `{"type":"number"}`},
		{"1.0 is a number", `1.0`, `{"type":"number"}`},
		{"boolean", `true`, `{"type":"boolean"}`},
		{"null", `null`, `{"type":"null"}`},
		{"not JSON", `Temperature: 18C`, `{"type":"string"}`},
		{"empty", ``, `{"type":"string"}`},
		{"truncated JSON", `{"a": [1, 2`, `{"type":"string"}`},
		{"empty object", `{}`, `{"type":"object","properties":{}}`},
		{"empty array", `[]`, `{"type":"array"}`},
		{"object keeps key order", `{"b":1,"a":"x","c":null}`,
			`{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"},"c":{"type":"null"}}}`},
		{"array items from every element", `[{"id":1},{"id":"x","extra":true},3]`,
			`{"type":"array","items":{"type":["object","integer"],"properties":{"id":{"type":["string","integer"]},"extra":{"type":"boolean"}}}}`},
		{"nested", `{"albums":{"href":"u","items":[{"artists":[{"name":"The Weeknd","popularity":0.9}]}],"meta":[]}}`,
			`{"type":"object","properties":{"albums":{"type":"object","properties":{"href":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"artists":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"popularity":{"type":"number"}}}}}}},"meta":{"type":"array"}}}}}`},
		{"array of arrays", `[[1,2],[3]]`, `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`},
		{"duplicate key merges", `{"a":null,"a":5}`, `{"type":"object","properties":{"a":{"type":["integer","null"]}}}`},
		{"date keys make a map", `{"symbol":"X","series":{"2024-01-02":{"close":1.5},"2024-01-03":{"close":2,"volume":7}}}`,
			`{"type":"object","properties":{"symbol":{"type":"string"},"series":{"type":"object","additionalProperties":{"type":"object","properties":{"close":{"type":"number"},"volume":{"type":"integer"}}}}}}`},
		{"ID keys make a map", `{"7f3a9c2e-1b4d-4e8a-9c0f-2d6b8e1a4c7f":"a","0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9":1}`,
			`{"type":"object","additionalProperties":{"type":["string","integer"]}}`},
		{"a field name is no data", `{"2024-01-02":1,"total":2}`,
			`{"type":"object","properties":{"2024-01-02":{"type":"integer"},"total":{"type":"integer"}}}`},
		{"escaped key", `{"say \"hi\"<>":1}`, `{"type":"object","properties":{"say \"hi\"<>":{"type":"integer"}}}`},
		{"surrounding space", "  [true]\n", `{"type":"array","items":{"type":"boolean"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := schemaOf(tt.in)
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	got := schemaOf(deep)
	if n := strings.Count(got, `"array"`); n != maxSchemaDepth+1 {
		t.Errorf("depth cap: %d array levels in %s", n, got)
	}
}

func TestMergeSchema(t *testing.T) {
	merge := func(contents ...string) string {
		var n *schemaNode
		for _, c := range contents {
			n = mergeSchema(n, deriveSchema(c))
		}
		var buf bytes.Buffer
		n.write(&buf)
		return buf.String()
	}
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"union of properties in first-seen order", []string{`{"a":1,"b":"x"}`, `{"c":true,"a":2}`},
			`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}}}`},
		{"integer widens to number", []string{`{"v":1}`, `{"v":1.5}`}, `{"type":"object","properties":{"v":{"type":"number"}}}`},
		{"number stays number", []string{`1.5`, `1`}, `{"type":"number"}`},
		{"null joins the types", []string{`null`, `{"a":1}`}, `{"type":["object","null"],"properties":{"a":{"type":"integer"}}}`},
		{"null after a type joins too", []string{`"x"`, `null`}, `{"type":["string","null"]}`},
		{"conflict: both types", []string{`{"a":"x"}`, `{"a":{"b":1}}`}, `{"type":"object","properties":{"a":{"type":["object","string"],"properties":{"b":{"type":"integer"}}}}}`},
		{"non-JSON after object adds string", []string{`{"a":1}`, `error: timeout`}, `{"type":["object","string"],"properties":{"a":{"type":"integer"}}}`},
		{"non-JSON first keeps later objects", []string{`error: timeout`, `{"a":1}`}, `{"type":["object","string"],"properties":{"a":{"type":"integer"}}}`},
		{"a map absorbs a listed object", []string{`{"m":{"a":1}}`, `{"m":{"20240102":"x"}}`},
			`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":["string","integer"]}}}}`},
		{"a listed object joins a map", []string{`{"m":{"20240102":"x"}}`, `{"m":{"a":1}}`},
			`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":["string","integer"]}}}}`},
		{"empty array then items", []string{`{"l":[]}`, `{"l":[{"x":1}]}`},
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"integer"}}}}}}`},
		{"array items merge", []string{`[{"x":1}]`, `[{"y":"s"}]`},
			`{"type":"array","items":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}}}`},
	}
	for _, tt := range tests {
		if got := merge(tt.in...); got != tt.want {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, got, tt.want)
		}
	}
}

func runResponseSchema(t testing.TB, cfg ResponseSchemaConfig, recs []*record.Record) (*responseSchemas, string, []*record.Record) {
	t.Helper()
	cfg.defaults()
	st, err := cfg.build(fxEnv("response_schema", nil))
	if err != nil {
		t.Fatal(err)
	}
	rs := st.(*responseSchemas)
	digest, err := rs.Plan(context.Background(), func(yield func(*record.Record) error) error {
		for _, r := range recs {
			if err := yield(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*record.Record
	for _, r := range recs {
		res, err := rs.Process(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
	}
	return rs, digest, out
}

func responseOf(r *record.Record, name string) string {
	t, _ := r.ToolByName(name)
	return string(t.Response)
}

func TestResponseSchemaStage(t *testing.T) {
	other := fxSingle()
	other.ID = "fx:single2"
	other.Messages[2].Results[0].Content = `{"status":"light","updated":"09:00"}`
	// Same name, different definition: a separate tool.
	renamed := fxSingle()
	renamed.ID = "fx:single3"
	renamed.Tools[0].Description = "Traffic, another provider"
	renamed.Messages[2].Results[0].Content = `["jam"]`
	recs := []*record.Record{fxSingle(), other, renamed, fxParallel(), fxMetaTool(), fxMultiTurn(), fxChat()}
	before := make([]*record.Record, len(recs))
	for i, r := range recs {
		before[i] = r.Clone()
	}
	_, digest, out := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	for i, r := range recs {
		if !equalJSON(t, r, before[i]) {
			t.Errorf("%s: input modified", r.ID)
		}
	}
	traffic := `{"type":"object","properties":{"status":{"type":"string"},"incidents":{"type":"array","items":{"type":"object","properties":{"road":{"type":"string"},"delay_min":{"type":"integer"}}}},"updated":{"type":"string"}}}`
	checks := []struct {
		rec  int
		tool string
		want string
	}{
		{0, "get_traffic_report", traffic},
		{1, "get_traffic_report", traffic},
		{2, "get_traffic_report", `{"type":"array","items":{"type":"string"}}`},
		{3, "get_stock_price", `{"type":"object","properties":{"price":{"type":"number"}}}`},
		{3, "get_local_time", `{"type":"object","properties":{"time":{"type":"string"}}}`},
		{3, "get_traffic_report", traffic}, // listed there, observed elsewhere
		{0, "get_stock_price", `{"type":"object","properties":{"price":{"type":"number"}}}`},
		{4, "meta_tool", ""}, // its results are other tools' definitions: no schema
		{5, "get_weather", `{"type":"object","properties":{"temp":{"type":"number"},"sky":{"type":"string"},"wind":{"type":"object","properties":{"kmh":{"type":"integer"}}}}}`},
		{6, "get_weather", `{"type":"object","properties":{"temp":{"type":"number"},"sky":{"type":"string"},"wind":{"type":"object","properties":{"kmh":{"type":"integer"}}}}}`},
	}
	for _, c := range checks {
		got := responseOf(out[c.rec], c.tool)
		if got != c.want {
			t.Errorf("%s %s:\n got  %s\n want %s", out[c.rec].ID, c.tool, got, c.want)
		}
	}
	if out[6] == recs[6] {
		t.Error("fx:chat lists get_weather, whose schema was derived from fx:multi")
	}
	if l := out[0].Lineage; len(l) != 1 || l[0].Provider != "rule" {
		t.Errorf("lineage %+v", l)
	}
	// Same input, same digest; changed observations, changed digest.
	_, again, _ := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	if again != digest {
		t.Error("digest not deterministic")
	}
	recs[0] = recs[0].Clone()
	recs[0].Messages[2].Results[0].Content = `{"status":"heavy","extra":1}`
	if _, changed, _ := runResponseSchema(t, ResponseSchemaConfig{}, recs); changed == digest {
		t.Error("digest ignores the observations")
	}
}

func TestResponseSchemaExisting(t *testing.T) {
	in := fxSingle()
	in.Tools[0].Response = json.RawMessage(`{"type":"object"}`)
	_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, []*record.Record{in})
	if got := responseOf(out[0], "get_traffic_report"); got != `{"type":"object"}` {
		t.Errorf("existing schema replaced: %s", got)
	}
	if out[0] != in {
		t.Error("nothing to change, the record must pass through")
	}
	_, _, out = runResponseSchema(t, ResponseSchemaConfig{Overwrite: true}, []*record.Record{in})
	if got := responseOf(out[0], "get_traffic_report"); !strings.Contains(got, "incidents") {
		t.Errorf("overwrite: %s", got)
	}
	// A second pass over its own output changes nothing.
	_, _, again := runResponseSchema(t, ResponseSchemaConfig{Overwrite: true}, out)
	if again[0] != out[0] {
		t.Error("second pass changed the record")
	}
}

func TestResponseSchemaNeedsPlan(t *testing.T) {
	st, _ := (&ResponseSchemaConfig{}).build(fxEnv("response_schema", nil))
	_, err := st.Process(context.Background(), fxSingle())
	if err == nil {
		t.Fatal("Process before Plan must fail")
	}
	if _, isReject := contract.ReasonOf(err); isReject {
		t.Error("Process before Plan is a systemic error, not a reject")
	}
}

// Results are matched to calls by position within a turn, and by name.
func TestObserveRecordParallel(t *testing.T) {
	var got []string
	observeRecord(fxParallel(), func(key string, n *schemaNode) {
		name, _, _ := strings.Cut(key, "\x00")
		var buf bytes.Buffer
		n.write(&buf)
		got = append(got, name+" "+buf.String())
	})
	want := []string{
		`get_stock_price {"type":"object","properties":{"price":{"type":"number"}}}`,
		`get_stock_price {"type":"object","properties":{"price":{"type":"number"}}}`,
		`get_local_time {"type":"object","properties":{"time":{"type":"string"}}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s", strings.Join(got, "\n"))
	}
	unknown := fxRecord("fx:unknown", nil, fxUser("x"), fxCalls("nowhere", `{}`), fxResults("nowhere", `{"a":1}`))
	observeRecord(unknown, func(key string, _ *schemaNode) { t.Errorf("observed %q without a definition", key) })
}

func FuzzDeriveSchema(f *testing.F) {
	f.Add(`{"a":[{"b":1.5}],"c":null}`)
	f.Add(`not json`)
	f.Add(`[[[[]]]]`)
	f.Add(`{"2024-01-02":{"x":[1,"a",null]},"2024-01-03":{"y":true}}`)
	f.Add(`[{"a":1},{"a":"s","b":[{"c":2.5}]}]`)
	f.Fuzz(func(t *testing.T, s string) {
		a, b := schemaOf(s), schemaOf(s)
		if a != b {
			t.Fatalf("not deterministic for %q", s)
		}
		if !json.Valid([]byte(a)) {
			t.Fatalf("schema of %q is not JSON: %s", s, a)
		}
		merged := boundSchema(mergeSchema(deriveSchema(s), deriveSchema(`{"x":1}`)))
		if !json.Valid(merged) || len(merged) > maxSchemaBytes {
			t.Fatalf("merged schema of %q is not JSON or too long: %s", s, merged)
		}
		// Both results it was derived from validate against it.
		sch := compileResponseSchema(t, string(merged))
		for _, c := range []string{s, `{"x":1}`} {
			if err := sch.Validate(resultInstance(t, c)); err != nil {
				t.Fatalf("%q does not validate against %s: %v", c, merged, err)
			}
		}
	})
}

// FuzzUnwrapEnvelope: the content itself, or for an envelope named f
// valid JSON found inside it.
func FuzzUnwrapEnvelope(f *testing.F) {
	f.Add(`[{"name":"f","results":{"a":1}}]`)
	f.Add(`{"name":"f","function_id":0,"results":[1]}`)
	f.Add(`[{"name":"g","results":1},{"name":"f","results":"x"}]`)
	f.Add(`[{"name":"f"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		got := unwrapEnvelope(s, "f")
		if got != s && (!json.Valid([]byte(got)) || !strings.Contains(s, strings.TrimSpace(got)[:1])) {
			t.Fatalf("unwrapEnvelope(%q) = %q", s, got)
		}
	})
}

func BenchmarkResponseSchema(b *testing.B) {
	var recs []*record.Record
	for range 100 {
		recs = append(recs, fxAll()...)
	}
	b.ReportAllocs()
	for b.Loop() {
		runResponseSchema(b, ResponseSchemaConfig{}, recs)
	}
}

// TestResponseSchemaToolACEEnvelope: ToolACE rows converted to sharegpt
// keep the [{"name", "results"}] envelope around a single call's result;
// read through the sharegpt reader, the tool's schema is that of the
// results, as for the raw ToolACE row, and the same for a meta_tool result
// in seed 000 Fig 12's envelope.
func TestResponseSchemaToolACEEnvelope(t *testing.T) {
	tools := `[{"name": "Get Zip Code Information", "description": "Details of a US zip code", "parameters": {"type": "object", "properties": {"zip": {"type": "string"}}}}, ` +
		`{"name": "lookup", "description": "Look something up", "parameters": {"type": "object", "properties": {}}}]`
	row := func(call, obs string) []byte {
		b, _ := json.Marshal(map[string]any{"tools": tools, "conversations": []map[string]string{
			{"from": "human", "value": "Where is 10001?"}, {"from": "function_call", "value": call}, {"from": "observation", "value": obs}, {"from": "gpt", "value": "New York."}}})
		return b
	}
	zip := `{"name": "Get Zip Code Information", "arguments": {"zip": "10001"}}`
	var recs []*record.Record
	for i, r := range [][]byte{
		row(zip, `[{"name": "Get Zip Code Information", "results": {"city": "New York", "latitude": 40.75}}]`),
		row(zip, `{"name": "Get Zip Code Information", "results": {"city": "New York", "state": "NY"}}`),
		// A converter that dropped a parallel call left both results.
		row(zip, `[{"name": "Countries", "results": {"countries": []}}, {"name": "Get Zip Code Information", "results": {"county": "New York"}}]`),
		// Not an envelope of this tool: a real result that happens to look alike.
		row(`{"name": "lookup", "arguments": {}}`, `[{"name": "someone else", "results": 3}]`),
	} {
		rec, err := formats.Parse("sharegpt", "toolace", int64(i), r)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	recs = append(recs, fxRecord("fx:paper", []record.Tool{verify.MetaToolDef()}, fxUser("x"),
		fxCalls(verify.MetaTool, `{"tool_description":"d","param_description":[]}`),
		fxResults(verify.MetaTool, `[{"name":"meta_tool","function_id":0,"results":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}]`)))
	_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	if got, want := responseOf(out[0], "Get Zip Code Information"), `{"type":"object","properties":{"city":{"type":"string"},"latitude":{"type":"number"},"state":{"type":"string"},"county":{"type":"string"}}}`; got != want {
		t.Errorf("zip code schema\n got  %s\n want %s", got, want)
	}
	if got, want := responseOf(out[3], "lookup"), `{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"results":{"type":"integer"}}}}`; got != want {
		t.Errorf("look-alike result\n got  %s\n want %s", got, want)
	}
	// meta_tool returns other tools' definitions (here in Fig 12's
	// envelope): the union of those would name every parameter of the
	// library, so it gets no schema.
	if got := responseOf(out[4], verify.MetaTool); got != "" {
		t.Errorf("meta_tool schema %s, want none", got)
	}
}

// TestResponseSchemaToolACESharegptRealData: on the 100 ToolACE rows
// converted to sharegpt in ../shared/data, no derived schema is the
// envelope's.
func TestResponseSchemaToolACESharegptRealData(t *testing.T) {
	recs := sharedRecords(t, 10, dump{"toolace/toolace_first100_sharegpt_partially_converted.json", "sharegpt"})
	_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	derived := 0
	for _, r := range out {
		for _, tl := range r.Tools {
			if len(tl.Response) == 0 {
				continue
			}
			derived++
			if strings.Contains(string(tl.Response), `"results":{`) {
				t.Errorf("%s: %s derives the envelope: %s", r.ID, tl.Name, tl.Response)
			}
		}
	}
	t.Logf("%d records, %d tool schemas derived", len(out), derived)
	if derived == 0 {
		t.Error("no schema derived from the real rows")
	}
}

// One tool whose schema two sources write with their keys in another order
// is one tool: a record listing it the other way gets the schema its
// results gave.
func TestResponseSchemaKeyOrder(t *testing.T) {
	seen := fxSingle() // lists get_traffic_report and observes its result
	other := fxChat()
	other.ID = "fx:reordered"
	other.Tools = []record.Tool{fxTool("get_traffic_report", "Get the current traffic report",
		`{"required":["location"],"properties":{"location":{"description":"The city and state, e.g. Los Angeles, CA","type":"string"}},"type":"object"}`)}
	_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, []*record.Record{seen, other})
	want := responseOf(out[0], "get_traffic_report")
	if want == "" || responseOf(out[1], "get_traffic_report") != want {
		t.Errorf("reordered tool's schema %q, want %q", responseOf(out[1], "get_traffic_report"), want)
	}
}

// BenchmarkObserveLongRecord: one record of many rounds (user, call, result,
// answer). Its tool scope is kept up as the turns go: the time grows with
// the rounds, not with their square (8k rounds: 478 ms when each tool turn
// read every turn before it again, 73 ms kept up).
func BenchmarkObserveLongRecord(b *testing.B) {
	r := fxSingle()
	round := slices.Clone(r.Messages)
	for range 8000 {
		r.Messages = append(r.Messages, round...)
	}
	for b.Loop() {
		n := 0
		observeRecord(r, func(string, *schemaNode) { n++ })
		if n == 0 {
			b.Fatal("no result observed")
		}
	}
}

// compileResponseSchema compiles a derived schema with an independent
// JSON Schema validator (Draft 2020-12).
func compileResponseSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem://response.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://response.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// resultInstance is the value a tool result stands for: its JSON, or the
// text itself (a string) when it is not JSON, as deriveSchema reads it.
func resultInstance(t *testing.T, content string) any {
	t.Helper()
	text := strings.TrimSpace(content)
	if text != "" && json.Valid([]byte(text)) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return content
}

// TestResponseSchemaValidatesObserved: every result a schema was derived
// from validates against it (QA F2: conflicts kept the first type, arrays
// the first element, null gave way, one non-JSON result made the schema a
// string), and data keys or too many keys make a map (QA F1).
func TestResponseSchemaValidatesObserved(t *testing.T) {
	many := func(prefix string, n int, val string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s%d":%s`, prefix, i, val)
		}
		b.WriteByte('}')
		return b.String()
	}
	deep := strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40)
	tests := []struct {
		name    string
		results []string
		want    string // a part the schema must hold; "" for none
	}{
		{"price number then string", []string{`{"price":530.33}`, `{"price":"$898.09"}`}, `"price":{"type":["string","number"]}`},
		{"null then string", []string{`null`, `"x"`}, `{"type":["string","null"]}`},
		{"heterogeneous array", []string{`[1,"a",{"b":2}]`}, `"items":{"type":["object","string","integer"]`},
		{"array of objects", []string{`[{"a":1},{"a":"s","b":true}]`}, `"b":{"type":"boolean"}`},
		{"property null then object", []string{`{"a":null}`, `{"a":{"b":1}}`}, `"a":{"type":["object","null"]`},
		{"error text first", []string{`Error: quota exceeded`, `{"status":"ok","items":[1]}`, `{"status":"ok","items":[2.5]}`}, `"items":{"type":"array","items":{"type":"number"}}`},
		{"boolean then string", []string{`{"v":true}`, `{"v":"yes"}`}, `"v":{"type":["string","boolean"]}`},
		{"integer then number", []string{`3`, `2.5`, `1e3`}, `{"type":"number"}`},
		{"nested arrays", []string{`[[1],["a",[true]]]`, `[]`}, ""},
		{"empty things", []string{`{}`, `[]`, `""`, ``}, ""},
		{"duplicate key", []string{`{"a":null,"a":5}`}, ""},
		{"date keys", []string{`{"series":{"2024-01-02":{"close":1.5}}}`, `{"series":{"2024-01-03":{"close":2,"volume":7}}}`}, `"series":{"type":"object","additionalProperties":`},
		{"too many keys", []string{many("k", 40, `1`), many("j", 40, `"x"`)}, `{"type":"object","additionalProperties":{"type":["string","integer"]}}`},
		{"too many keys in one result", []string{many("k", maxSchemaProperties+1, `[true]`)}, `"additionalProperties":{"type":"array"`},
		{"too long: the deepest widest objects become maps first", []string{many("f", 50, many("g", 50, `{"x":1,"y":"z"}`))}, `{"type":"object","properties":{"f0":{"type":"object","additionalProperties":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}}},"f1":`},
		{"deeper than the cap", []string{deep}, ""},
		{"envelope look-alike", []string{`[{"name":"t","results":{"a":1}}]`, `{"name":"t","results":[]}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []*record.Record
			for i, c := range tt.results {
				r := fxSingle()
				r.ID = fmt.Sprintf("fx:%d", i)
				r.Messages[2].Results[0].Content = c
				recs = append(recs, r)
			}
			_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, recs)
			schema := responseOf(out[0], "get_traffic_report")
			if len(schema) > maxSchemaBytes {
				t.Errorf("schema of %d bytes, over %d", len(schema), maxSchemaBytes)
			}
			if !strings.Contains(schema, tt.want) {
				t.Errorf("schema %s\nlacks %s", schema, tt.want)
			}
			s := compileResponseSchema(t, schema)
			for _, c := range tt.results {
				if err := s.Validate(resultInstance(t, c)); err != nil {
					t.Errorf("result %.80s does not validate against its schema %.300s: %v", c, schema, err)
				}
			}
		})
	}
}

// TestResponseSchemaValidatesObservedRealData: on the real rows in
// ../shared/data, every tool result validates against the schema its tool
// got (QA F2: 7 of 659 did not), and no schema is over the bound.
func TestResponseSchemaValidatesObservedRealData(t *testing.T) {
	recs := sharedRecords(t, 100,
		dump{"llamafactory/glaive_toolcall_en_demo.json", "sharegpt"},
		dump{"llamafactory/glaive_toolcall_zh_demo.json", "sharegpt"},
		dump{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		dump{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		dump{"glaive/glaive_v2_rows_dataflow.jsonl", "glaive"},
		dump{"toolace/toolace_first100_sharegpt_partially_converted.json", "sharegpt"})
	_, _, out := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	compiled := map[string]*jsonschema.Schema{}
	checked := 0
	for _, r := range out {
		var calls []record.Call
		for _, m := range r.Messages {
			if m.Role == record.RoleAssistant && len(m.Calls) > 0 {
				calls = m.Calls
			}
			if m.Role != record.RoleTool {
				continue
			}
			for i, res := range m.Results {
				name := res.Name
				if name == "" && i < len(calls) {
					name = calls[i].Name
				}
				tl, ok := r.ToolByName(name)
				if !ok || len(tl.Response) == 0 {
					continue
				}
				if len(tl.Response) > maxSchemaBytes {
					t.Errorf("%s: %s schema of %d bytes", r.ID, name, len(tl.Response))
				}
				s := compiled[string(tl.Response)]
				if s == nil {
					s = compileResponseSchema(t, string(tl.Response))
					compiled[string(tl.Response)] = s
				}
				if err := s.Validate(resultInstance(t, unwrapEnvelope(res.Content, name))); err != nil {
					t.Errorf("%s: %s result %.100s fails %.200s: %v", r.ID, name, res.Content, tl.Response, err)
				}
				checked++
			}
		}
	}
	t.Logf("%d records, %d results validated", len(out), checked)
	if checked < 100 {
		t.Errorf("only %d results checked", checked)
	}
}
