package report

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// TestTagsOfAsTag holds tagsOf's one pass to Record.Tag's search per key:
// sorted lists, lists out of order, a key twice, empty values.
func TestTagsOfAsTag(t *testing.T) {
	tag := func(kv ...string) []record.Tag {
		var tags []record.Tag
		for i := 0; i < len(kv); i += 2 {
			tags = append(tags, record.Tag{Key: kv[i], Value: kv[i+1]})
		}
		return tags
	}
	for _, tags := range [][]record.Tag{
		nil,
		tag("category", "function_missing", "decision_tokens", "on", "difficulty", "simple", "result_mode", "oracle", "world", "open", "xlam_id", "0"),
		tag("a", "1", "lang", "zh", "noise_similarity", "0.73", "tokens", "412", "verify.schema", "fail"),
		tag("category", "", "category", "chat", "world", "closed", "world", "open"),
		tag("world", "open", "category", "x", "lang", "en", "difficulty", "hard"), // out of order
		tag("tokens", "9", "tokens", "", "lang", "en"),                            // out of order, a key twice
		tag("", "", "category", "c", "difficulty", "", "lang", "und", "noise_similarity", "", "tokens", "7", "world", "w"),
	} {
		r := &record.Record{Tags: tags}
		want := distTags{category: r.Tag("category"), world: r.Tag("world"), difficulty: r.Tag("difficulty"),
			lang: r.Tag("lang"), tokens: r.Tag("tokens"), noiseSimilarity: r.Tag("noise_similarity")}
		if got := tagsOf(r); got != want {
			t.Errorf("tags %v: tagsOf = %+v, Tag gives %+v", tags, got, want)
		}
	}
}

// TestLangAsCounted holds Lang's shortcut for user turns in ASCII alone
// to the count of their letters (langCounted), over texts with and
// without letters, Latin and other scripts, bytes that are not UTF-8 and
// every length around a word.
func TestLangAsCounted(t *testing.T) {
	texts := []string{"", "1234 5678 ?!", "Hi", "What is the weather in Paris? (#12)", "@[`{", "Zz",
		"café au lait", "天气怎么样", "ab 天气", "abcd 天", "Ωμέγα", "\xff\xfe abc", strings.Repeat("x", 17), "12345678a", "1234567\x80"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "1", " ", "@", "[", "é", "天", "\xff", "`", "{"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for i, a := range texts {
		for _, b := range []string{"", "plain text", "天气", a} {
			r := &record.Record{Messages: []record.Message{{Role: record.RoleUser, Content: a}, {Role: record.RoleAssistant, Content: "天天天天天天天"},
				{Role: record.RoleUser, Content: b}}}
			if got, want := Lang(r), langCounted(r); got != want {
				t.Fatalf("text %d: user turns %q and %q: Lang %q, counted %q", i, a, b, got, want)
			}
		}
	}
}
