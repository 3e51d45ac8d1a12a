package shard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// fixtureRecords covers every field of record.Record: nested parallel calls
// and their results, reasoning, tags, lineage, unicode and HTML-ish text,
// large strings, absent and present response schemas, nil and empty
// slices.
func fixtureRecords() []*record.Record {
	big := strings.Repeat("長い文字列 with ASCII, emoji 🧪 and <tags> & ampersands. ", 4000) // ~250 KB
	weather := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"City <name> & country"},"days":{"type":"integer"}},"required":["city"]}`)
	full := &record.Record{
		ID:     "toolace:17/neg-1",
		Source: "toolace",
		Format: "toolace",
		Row:    17,
		System: "You are a helpful assistant. 你是一个有帮助的助手。",
		Tools: []record.Tool{
			{Name: "get_weather", Description: "Weather for <city> & \"region\"", Parameters: weather,
				Response: json.RawMessage(`{"type":"object","properties":{"temp_c":{"type":"number"}}}`)},
			{Name: "no_args", Description: "", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
		Messages: []record.Message{
			{Role: record.RoleSystem, Content: "system turn"},
			{Role: record.RoleUser, Content: "Weather in 台北 and Zürich for 3 days? مرحبا"},
			{Role: record.RoleAssistant, Reasoning: "Two cities → two parallel calls.", Content: "Checking both.",
				Calls: []record.Call{
					{Name: "get_weather", Arguments: json.RawMessage(`{"city":"台北","days":3}`)},
					{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Zürich","days":3}`)},
				}},
			{Role: record.RoleTool, Results: []record.Result{
				{Name: "get_weather", Content: `{"temp_c":28.5}`},
				{Name: "get_weather", Content: "plain text result, not JSON"},
			}},
			{Role: record.RoleAssistant, Calls: []record.Call{{Name: "no_args", Arguments: json.RawMessage(`{}`)}}},
			{Role: record.RoleTool, Results: []record.Result{{Name: "no_args", Content: ""}}},
			{Role: record.RoleAssistant, Content: big},
		},
		Tags:    []record.Tag{{Key: "category", Value: "multi_turn"}, {Key: "lang", Value: "zh-TW"}, {Key: "world", Value: "open"}},
		Lineage: []record.Step{{Stage: "ingest", Provider: "rule"}, {Stage: "negatives", Provider: "openai", Model: "gpt-4o-mini"}},
	}
	minimal := &record.Record{ID: "glaive:0"}
	emptySlices := &record.Record{
		ID: "xlam:9", Source: "xlam", Format: "xlam", Row: 1<<62 + 3,
		Tools:    []record.Tool{},
		Messages: []record.Message{{Role: record.RoleUser, Content: "", Calls: []record.Call{}, Results: []record.Result{}}},
		Tags:     []record.Tag{},
		Lineage:  []record.Step{},
	}
	return []*record.Record{full, minimal, emptySlices}
}

// syntheticRecords returns n deterministic records shaped like converted
// tool-use dialogues, for row-group and benchmark tests that must run
// without the shared data.
func syntheticRecords(n int, seed uint64) []*record.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the a weather city temperature forecast search recipe flight booking hotel price " +
		"currency convert stock quote calendar event remind note translate 天气 城市 温度 預報 搜索 航班 酒店 价格 " +
		"please could you find me for tomorrow today next week with about between and or in on at")
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	out := make([]*record.Record, n)
	for i := range out {
		tools := make([]record.Tool, 1+rng.IntN(3))
		for j := range tools {
			tools[j] = record.Tool{
				Name:        fmt.Sprintf("tool_%d", rng.IntN(50)),
				Description: text(10 + rng.IntN(20)),
				Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q":{"type":"string","description":%q},"n":{"type":"integer"}},"required":["q"]}`,
					text(6))),
			}
		}
		r := &record.Record{
			ID: fmt.Sprintf("synthetic:%d", i), Source: "synthetic", Format: "glaive", Row: int64(i),
			System: text(15), Tools: tools,
		}
		r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: text(10 + rng.IntN(30))})
		for range 1 + rng.IntN(3) {
			call := record.Call{Name: tools[0].Name, Arguments: json.RawMessage(fmt.Sprintf(`{"q":%q,"n":%d}`, text(3), rng.IntN(100)))}
			r.Messages = append(r.Messages,
				record.Message{Role: record.RoleAssistant, Calls: []record.Call{call}},
				record.Message{Role: record.RoleTool, Results: []record.Result{{Name: call.Name, Content: fmt.Sprintf(`{"result":%q}`, text(20+rng.IntN(40)))}}},
				record.Message{Role: record.RoleAssistant, Content: text(20 + rng.IntN(60))},
			)
		}
		r.SetTag("category", r.Category())
		r.SetTag("lang", "en")
		r.AddStep("ingest", "rule", "")
		out[i] = r
	}
	return out
}

// sharedDataDir locates ../shared/data (beside the repository) from the package directory (or
// AUGMENT_SHARED_DATA) and skips the test when it is absent.
func sharedDataDir(tb testing.TB) string {
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		tb.Skipf("shared data not found at %s (set AUGMENT_SHARED_DATA): %v", dir, err)
	}
	return dir
}

// llamaFactoryRecords turns the LLaMA-Factory glaive tool-call demos (real
// sharegpt rows, en and zh) into records with a small test-only converter.
func llamaFactoryRecords(tb testing.TB) []*record.Record {
	dir := sharedDataDir(tb)
	var out []*record.Record
	for _, name := range []string{"glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json"} {
		b, err := os.ReadFile(filepath.Join(dir, "llamafactory", name))
		if err != nil {
			tb.Fatal(err)
		}
		var rows []struct {
			Conversations []struct{ From, Value string } `json:"conversations"`
			Tools         string                         `json:"tools"`
		}
		if err := json.Unmarshal(b, &rows); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		for i, row := range rows {
			r := &record.Record{ID: fmt.Sprintf("%s:%d", name, i), Source: name, Format: "sharegpt", Row: int64(i)}
			if err := json.Unmarshal([]byte(row.Tools), &r.Tools); err != nil {
				tb.Fatalf("%s row %d tools: %v", name, i, err)
			}
			for _, turn := range row.Conversations {
				switch turn.From {
				case "human":
					r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: turn.Value})
				case "gpt":
					r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Content: turn.Value})
				case "function_call":
					var c record.Call
					if err := json.Unmarshal([]byte(turn.Value), &c); err != nil {
						tb.Fatalf("%s row %d call: %v", name, i, err)
					}
					r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Calls: []record.Call{c}})
				case "observation":
					// A few rows (zh row 197) answer a call written as
					// text in a gpt turn; the result then has no name.
					var callName string
					if n := len(r.Messages); n > 0 && len(r.Messages[n-1].Calls) > 0 {
						callName = r.Messages[n-1].Calls[0].Name
					}
					r.Messages = append(r.Messages, record.Message{Role: record.RoleTool,
						Results: []record.Result{{Name: callName, Content: turn.Value}}})
				default:
					tb.Fatalf("%s row %d: unknown role %q", name, i, turn.From)
				}
			}
			r.SetTag("category", r.Category())
			r.AddStep("ingest", "rule", "")
			out = append(out, r)
		}
	}
	return out
}

// jsonSize is the size of recs as JSON lines, the unit of the benchmarks'
// MB/s figures.
func jsonSize(tb testing.TB, recs []*record.Record) int64 {
	var n int64
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		n += int64(len(b)) + 1
	}
	return n
}

// normalized returns deep copies of recs in the form Read returns.
func normalized(recs []*record.Record) []*record.Record {
	out := make([]*record.Record, len(recs))
	for i, r := range recs {
		c := r.Clone()
		Normalize(c)
		out[i] = c
	}
	return out
}
