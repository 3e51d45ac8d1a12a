package toollib

import (
	"fmt"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func TestNamesNear(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"calculate_loan_payment", "calculate_loan_repayment", true}, // payment ends repayment
		{"generate_password", "generate_random_password", true},      // a word added
		{"search_recipe", "search_recipes", true},                    // plural
		{"calculate_discount", "calculate_discounted_price", true},   // discount begins discounted
		{"Get Object Bounds", "GetVisualObjectBounds", true},         // spaces and camelCase
		{"get_colour", "getColor", true},                             // one edit, both ≥ 5 letters
		{"create_event", "create_calendar_event", true},
		{"median", "calculate_median", true},
		{"search_books", "search_movies", false},
		{"calculate_age", "calculate_area", false}, // one edit, but words of 3 and 4 letters
		{"get_news", "get_weather", false},         // only "get" in common
		{"caisoprice", "get_stock_price", false},   // "price" is 5 letters shorter than "caisoprice"
		{"find_nearest_park", "findpincodebysubdistrict", false},
		{"generate_barcode", "generate_qr_code", true}, // near names; their descriptions decide
		{"get_stock_price", "get_stock_price_history", true},
		{"", "get_news", false},
		{"__", "get_news", false},
		{"tool2", "tool_2", true},
	}
	for _, tt := range tests {
		if got := NamesNear(tt.a, tt.b); got != tt.want {
			t.Errorf("NamesNear(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := NamesNear(tt.b, tt.a); got != tt.want {
			t.Errorf("NamesNear(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

// wordsVec embeds a text as counts of its lower-cased words over a tiny
// fixed vocabulary built on the fly (deterministic for one test).
func wordsVec(vocab map[string]int) func(string) []float32 {
	return func(s string) []float32 {
		v := make([]float32, 64)
		for _, w := range strings.Fields(strings.ToLower(s)) {
			i, ok := vocab[w]
			if !ok {
				i = len(vocab) % 64
				vocab[w] = i
			}
			v[i]++
		}
		return v
	}
}

func TestNearTwins(t *testing.T) {
	embed := wordsVec(map[string]int{})
	tool := func(name, desc string) record.Tool { return record.Tool{Name: name, Description: desc} }
	pw := tool("generate_password", "generate a random password")
	tests := []struct {
		b    record.Tool
		min  float64
		want bool
	}{
		{tool("generate_random_password", "generate a random password of a given length"), 0.4, true},
		{tool("generate_random_password", "make up a passphrase"), 0.4, false}, // names near, descriptions not
		{tool("create_secret", "generate a random password"), 0.4, false},      // descriptions equal, names not near
		{tool("generate_password", "something else entirely"), 0, false},       // same name: not a twin
		{tool("generate_random_password", "generate a random password of a given length"), 1, false},
		{tool("generate_random_password", ""), 1, true},         // an empty description: the names decide
		{tool("generate_random_password", "生成一个随机密码"), 1, true}, // another language: the names decide
		{tool("create_secret", "生成一个随机密码"), 0, false},           // … when they are near
	}
	for _, tt := range tests {
		if got := NearTwins(pw, tt.b, embed, tt.min); got != tt.want {
			t.Errorf("NearTwins(%s, %s %q, min %.1f) = %v, want %v", pw.Name, tt.b.Name, tt.b.Description, tt.min, got, tt.want)
		}
	}
}

// The ASCII path of wordsMatch answers as the rune path does.
func TestWordsMatchASCII(t *testing.T) {
	words := []string{"pay", "payment", "repayment", "payments", "paymen", "paymant", "discount", "discounted", "recipe",
		"recipes", "search", "serch", "searches", "loan", "loans", "abcde", "abcdf", "abcdef", "xabcde", "bcde", "get", "gets", "a", ""}
	for _, a := range words {
		for _, b := range words {
			if a == b {
				continue
			}
			if got, want := wordsMatchASCII(a, b), wordsMatchRunes(a, b); got != want {
				t.Errorf("%q, %q: ASCII path %v, rune path %v", a, b, got, want)
			}
		}
	}
}

// TestTwinNear: a prepared Twin answers as NearTwins for every pair of a
// set of names and descriptions, with one Twin reused for many pairs.
func TestTwinNear(t *testing.T) {
	names := []string{"calculate_loan_payment", "calculate_loan_repayment", "generate_password", "generate_random_password",
		"search_recipe", "search_recipes", "getColor", "get_colour", "search_books", "search_movies", "tool2", "tool_2", "", "__", "计算贷款"}
	descs := []string{"Generate a random password", "Generate a password of a given length", "生成一个随机密码", ""}
	embed := wordsVec(map[string]int{})
	var tools []record.Tool
	for _, n := range names {
		for _, d := range descs {
			tools = append(tools, record.Tool{Name: n, Description: d})
		}
	}
	twins := make([]Twin, len(tools))
	for i, tl := range tools {
		twins[i] = NewTwin(tl)
	}
	for i, a := range tools {
		for j, b := range tools {
			for _, min := range []float64{0, 0.4, 1} {
				if got, want := twins[i].Near(&twins[j], embed, min), NearTwins(a, b, embed, min); got != want {
					t.Fatalf("Twin(%q %q).Near(%q %q, %v) = %v, NearTwins %v", a.Name, a.Description, b.Name, b.Description, min, got, want)
				}
			}
		}
	}
}

// BenchmarkTwins tests one invoked tool against 1,000 library names, as a
// distractor draw does: NearTwins splits both names for every pair, a
// prepared Twin splits each name once.
func BenchmarkTwins(b *testing.B) {
	inv := record.Tool{Name: "calculate_loan_payment", Description: "Calculate the monthly payment of a loan"}
	var lib []record.Tool
	for i := range 1000 {
		lib = append(lib, record.Tool{Name: fmt.Sprintf("get_item_%d_details", i), Description: "Look up an item"})
	}
	embed := wordsVec(map[string]int{})
	b.Run("NearTwins", func(b *testing.B) {
		for b.Loop() {
			for _, c := range lib {
				NearTwins(inv, c, embed, 0.4)
			}
		}
	})
	b.Run("Twin", func(b *testing.B) {
		twins := make([]Twin, len(lib))
		for i, c := range lib {
			twins[i] = NewTwin(c)
		}
		b.ResetTimer()
		for b.Loop() {
			ti := NewTwin(inv)
			for i := range twins {
				ti.Near(&twins[i], embed, 0.4)
			}
		}
	})
}
