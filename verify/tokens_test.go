package verify

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"软件信息网络", 3}, // measured in GO-DEPS.md §5 for o200k_base
	} {
		if got := Tokens(tt.text); got != tt.want {
			t.Errorf("Tokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
	// Special tokens count as text: more than the one special token.
	if n := Tokens("<|endoftext|>"); n < 2 {
		t.Errorf("special token text counted as %d token(s)", n)
	}
}

func TestTokensConcurrent(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸。", 20)
	want := Tokens(text)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got := Tokens(text); got != want {
					t.Errorf("got %d, want %d", got, want)
				}
			}
		})
	}
	wg.Wait()
}

func TestRecordTokens(t *testing.T) {
	r := twoTurns()
	n := RecordTokens(r)
	// Lower bound: the texts themselves.
	sum := 0
	for _, m := range r.Messages {
		sum += Tokens(m.Content)
		for _, c := range m.Calls {
			sum += Tokens(string(c.Arguments))
		}
		for _, res := range m.Results {
			sum += Tokens(res.Content)
		}
	}
	if n <= sum+len(r.Messages)*tokensPerMessage {
		t.Errorf("RecordTokens = %d, not above texts %d plus framing", n, sum)
	}
	// Adding a message adds its tokens and framing exactly.
	r2 := r.Clone()
	r2.Messages = append(r2.Messages, user("thanks a lot"))
	if got, want := RecordTokens(r2)-n, tokensPerMessage+Tokens("user")+Tokens("thanks a lot"); got != want {
		t.Errorf("one more message adds %d, want %d", got, want)
	}
	// Tools and system count; bad parameters JSON does not break counting.
	r3 := r.Clone()
	r3.System = "Be brief."
	r3.Tools = append(r3.Tools, record.Tool{Name: "bad", Parameters: json.RawMessage(`{oops`)})
	if RecordTokens(r3) <= n {
		t.Error("system prompt and tools not counted")
	}
	if got := RecordTokens(&record.Record{}); got != tokensReply {
		t.Errorf("empty record = %d", got)
	}
}

func BenchmarkTokens(b *testing.B) {
	text := strings.Repeat(`{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}} The weather in Paris is sunny. `, 10)
	Tokens(text) // load outside the timing
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		Tokens(text)
	}
}

func BenchmarkRecordTokens(b *testing.B) {
	r := twoTurns()
	RecordTokens(r)
	b.ResetTimer()
	for b.Loop() {
		RecordTokens(r)
	}
}
