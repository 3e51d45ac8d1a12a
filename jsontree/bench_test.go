package jsontree

import (
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
)

// benchTexts are JSON texts shaped like the dumps' rows: a glaive-like row
// (long strings with newlines and quotes escaped), an xlam-like row (JSON
// held in strings, so escapes every few bytes), a nested tool list, and
// Chinese text.
var benchTexts = func() map[string]string {
	tool := `{"name": "get_weather", "description": "Get the current weather for a city, in \"metric\" or \"imperial\" units.", ` +
		`"parameters": {"city": {"description": "The city name", "type": "str", "default": "Paris"}, "units": {"description": "Units", "type": "str, optional"}}}`
	tools := "[" + strings.Repeat(tool+", ", 5) + tool + "]"
	esc := func(s string) string { return string(AppendString(nil, s)) }
	chat := strings.Repeat("USER: What is the weather like in \"Paris\" today?\n\n\nASSISTANT: Let me check that for you. <|endoftext|>\n\n\n", 20)
	zh := strings.Repeat("用户：今天台北的天气怎么样？\n助手：我来帮你查一下。", 30)
	return map[string]string{
		"glaive": `{"system": ` + esc("SYSTEM: You are a helpful assistant -"+tools) + `, "chat": ` + esc(chat) + `}`,
		"xlam":   `{"id": 1, "query": "Weather in Paris?", "answers": ` + esc(`[{"name": "get_weather", "arguments": {"city": "Paris"}}]`) + `, "tools": ` + esc(tools) + `}`,
		"tools":  tools,
		"zh":     `{"chat": ` + esc(zh) + `}`,
	}
}()

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"glaive", "xlam", "tools", "zh"} {
		text := []byte(benchTexts[name])
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var a Arena
			cpu0 := cputime.Process()
			for range b.N {
				p := Parser{Data: text, CopyStrings: true, Arena: &a}
				if _, err := p.Parse(); err != nil {
					b.Fatal(err)
				}
				a.Reset()
			}
			reportCPU(b, cpu0, len(text))
		})
	}
}

func BenchmarkCompact(b *testing.B) {
	for _, name := range []string{"glaive", "xlam", "tools", "zh"} {
		v, err := ParseString(benchTexts[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(benchTexts[name])))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for range b.N {
				Compact(&v)
			}
			reportCPU(b, cpu0, len(benchTexts[name]))
		})
	}
}

// reportCPU reports the process CPU time per MB of text since cpu0
// (cpu-ms/MB), steadier than wall time on a shared machine.
func reportCPU(b *testing.B, cpu0 time.Duration, n int) {
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()*1e3/(float64(n)*float64(b.N)/1e6), "cpu-ms/MB")
	}
}
