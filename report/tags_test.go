package report

import (
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
