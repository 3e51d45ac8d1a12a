package toollib

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/augmentdata/augment/stages/record"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ,.;  ", nil},
		{"Get the WEATHER now", []string{"get", "the", "weather", "now"}},
		{"live_giveaways_by_type", []string{"live", "giveaways", "by", "type"}},
		{"getWeatherByCity", []string{"get", "weather", "by", "city"}},
		{"convert2PDF v2", []string{"convert2", "pdf", "v2"}},
		{"HTMLParser", []string{"htmlparser"}},
		{"it's $1.5", []string{"it", "s", "1", "5"}},
		{"Café MÜNCHEN", []string{"café", "münchen"}},
		{"天气", []string{"天", "天气", "气"}},
		{"天气预报", []string{"天", "天气", "气", "气预", "预", "预报", "报"}},
		{"查询天气API接口", []string{"查", "查询", "询", "询天", "天", "天气", "气", "api", "接", "接口", "口"}},
		{"获取 新闻", []string{"获", "获取", "取", "新", "新闻", "闻"}}, // no bigram across a space
		{"股票，价格", []string{"股", "股票", "票", "价", "价格", "格"}},
		{"1990年5月", []string{"1990", "年", "5", "月"}},
		{"天\u2f3a气〇〇", []string{"天", "气"}}, // Han-script symbols (a Kangxi radical, 〇) separate
	}
	for _, tt := range tests {
		got := Tokenize(tt.in)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func bm25Tool(name, desc string) record.Tool {
	return record.Tool{Name: name, Description: desc, Parameters: []byte(`{"type":"object","properties":{}}`)}
}

// The first tool of each library is the one the query asks for.
func TestBM25Ranking(t *testing.T) {
	en := []record.Tool{
		bm25Tool("calculate_area", "Calculate the area of a given shape"),
		bm25Tool("calculate_discount", "Calculate the discounted price based on original price and discount percentage"),
		bm25Tool("get_news", "Get the latest news articles"),
		bm25Tool("live_giveaways_by_type", "Retrieve live giveaways from the GamerPower API based on the specified type."),
		bm25Tool("convert_currency", "Convert an amount from one currency to another"),
		bm25Tool("search_recipes", "Search for recipes based on ingredients"),
		bm25Tool("get_stock_price", "Get the current stock price of a company"),
	}
	zh := []record.Tool{
		bm25Tool("generate_invoice", "生成发票"),
		bm25Tool("generate_password", "生成随机密码"),
		bm25Tool("get_news", "获取最新新闻文章"),
		bm25Tool("search_books", "根据提供的标准搜索书籍"),
		bm25Tool("calculate_age", "根据出生日期计算年龄"),
		bm25Tool("calculate_area", "计算指定形状的面积"),
		bm25Tool("convert_currency", "转换货币"),
		bm25Tool("search_recipes", "根据各种标准搜索食谱"),
	}
	tests := []struct {
		name  string
		tools []record.Tool
		query string
		want  []string // expected head of the ranking
	}{
		{"en area", en, "I need to calculate the area of a rectangle. The length is 5 units.", []string{"calculate_area"}},
		{"en giveaways", en, "Where can I find live giveaways for beta access and games?", []string{"live_giveaways_by_type"}},
		{"en currency", en, "Please convert 500 US dollars to euros, what currency rate applies?", []string{"convert_currency"}},
		{"en stock", en, "What's the current price of Apple stock?", []string{"get_stock_price", "calculate_discount"}},
		{"en recipes", en, "Find me recipes with tomato and basil as ingredients", []string{"search_recipes"}},
		{"zh invoice", zh, "我需要为John Doe生成一张发票。他购买了2个苹果。", []string{"generate_invoice", "generate_password"}},
		{"zh news", zh, "你能帮我找到最新的美国体育新闻吗？", []string{"get_news"}},
		{"zh age", zh, "你好，我出生于1990年5月15日。你能告诉我我今天几岁了吗？请计算年龄。", []string{"calculate_age"}},
		{"zh area", zh, "你能计算出一个长为5、宽为3的矩形的面积吗？", []string{"calculate_area"}},
		{"zh currency", zh, "你好，我需要将500美元转换成欧元。", []string{"convert_currency"}},
		{"zh recipes", zh, "我在寻找一个包含番茄的纯素意大利食谱。", []string{"search_recipes"}},
		{"mixed", zh, "search books 搜索书籍", []string{"search_books"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewToolBM25(tt.tools)
			rank := ix.Rank(tt.query)
			if len(rank) != len(tt.tools) {
				t.Fatalf("Rank returned %d scores for %d tools", len(rank), len(tt.tools))
			}
			var got []string
			for _, h := range rank[:len(tt.want)] {
				got = append(got, tt.tools[h.Doc].Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ranking head = %q, want %q (full: %v)", got, tt.want, rank)
			}
			if rank[0].Score <= rank[len(rank)-1].Score {
				t.Errorf("best score %v not above worst %v", rank[0].Score, rank[len(rank)-1].Score)
			}
		})
	}
}

func TestBM25Scores(t *testing.T) {
	ix := NewBM25([]string{"apple banana", "apple apple cherry date", "egg"})
	// Hand computation: N=3, avgdl=7/3; "apple" in 2 docs.
	idf := math.Log(1 + (3-2+0.5)/(2+0.5))
	want0 := idf * 1 * 2.2 / (1 + 1.2*(0.25+0.75*2/(7.0/3)))
	want1 := idf * 2 * 2.2 / (2 + 1.2*(0.25+0.75*4/(7.0/3)))
	rank := ix.Rank("apple APPLE")
	got := map[int]float64{}
	for _, h := range rank {
		got[h.Doc] = h.Score
	}
	if math.Abs(got[0]-want0) > 1e-12 || math.Abs(got[1]-want1) > 1e-12 || got[2] != 0 {
		t.Errorf("scores = %v, want 0:%v 1:%v 2:0", got, want0, want1)
	}
	if rank[0].Doc != 1 || rank[2].Doc != 2 {
		t.Errorf("rank = %v, want doc 1 first and doc 2 last", rank)
	}
}

func TestBM25Ties(t *testing.T) {
	ix := NewBM25([]string{"x", "same bm25Words", "y", "same bm25Words", "z"})
	rank := ix.Rank("same")
	order := make([]int, len(rank))
	for i, h := range rank {
		order[i] = h.Doc
	}
	if want := []int{1, 3, 0, 2, 4}; !slices.Equal(order, want) {
		t.Errorf("tie order = %v, want %v", order, want)
	}
	if got := ix.Search("same", 10); len(got) != 2 || got[0].Doc != 1 || got[1].Doc != 3 {
		t.Errorf("Search = %v, want docs 1 then 3", got)
	}
	if got := ix.Search("nothing matches", 3); len(got) != 0 {
		t.Errorf("Search without matches = %v", got)
	}
	if got := ix.Search("same", 0); got != nil {
		t.Errorf("Search k=0 = %v", got)
	}
	if got := NewBM25(nil).Rank("q"); len(got) != 0 {
		t.Errorf("empty index Rank = %v", got)
	}
}

// Search must agree with the positive-score head of Rank.
func TestBM25SearchMatchesRank(t *testing.T) {
	lib := bm25Library(2000, 7)
	ix := NewToolBM25(lib)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		q := lib[r.IntN(len(lib))].Description
		for _, k := range []int{1, 5, 20} {
			got := ix.Search(q, k)
			var want []Hit
			for _, h := range ix.Rank(q) {
				if h.Score > 0 && len(want) < k {
					want = append(want, h)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("query %d k=%d: Search = %v, Rank head = %v", i, k, got, want)
			}
		}
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "getWeatherByCity", "天气预报 API", "a_b-c", "\xff\xfe", "Ǆemo ǅ", "1990年5月15日", "\u2f3a", "々〆"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		for _, tok := range toks {
			if tok == "" {
				t.Fatalf("empty token from %q", s)
			}
			if strings.ContainsFunc(tok, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
				t.Fatalf("token %q from %q holds a separator", tok, s)
			}
		}
		// Tokenizing is stable under a repeat and a document always matches itself.
		if !slices.Equal(toks, Tokenize(s)) {
			t.Fatalf("Tokenize(%q) not deterministic", s)
		}
		ix := NewBM25([]string{s, "unrelated filler text"})
		if len(toks) > 0 && ix.Rank(s)[0].Score <= 0 {
			t.Fatalf("document %q does not match itself", s)
		}
	})
}

var bm25Words = strings.Fields(`get search find list create update delete convert calculate fetch weather
stock price news movie recipe flight hotel currency exchange rate city country user account order
payment invoice email message translate text image video music song artist album book author
location distance time date timezone temperature forecast score team player match league market
crypto wallet address transaction token balance product review rating restaurant menu`)

var bm25HanWords = []string{"天气", "股票", "价格", "新闻", "电影", "食谱", "航班", "酒店", "货币", "汇率", "城市", "用户", "订单", "发票", "翻译"}

// bm25Library makes n distinct tools from a fixed vocabulary; a quarter
// have Chinese descriptions.
func bm25Library(n int, seed uint64) []record.Tool {
	r := rand.New(rand.NewPCG(seed, seed))
	tools := make([]record.Tool, n)
	for i := range tools {
		name := fmt.Sprintf("%s_%s_%s_%d", bm25Words[r.IntN(len(bm25Words))], bm25Words[r.IntN(len(bm25Words))], bm25Words[r.IntN(len(bm25Words))], i)
		var d []string
		for range 6 + r.IntN(12) {
			d = append(d, bm25Words[r.IntN(len(bm25Words))])
		}
		desc := strings.Join(d, " ")
		if i%4 == 0 {
			desc = bm25HanWords[r.IntN(len(bm25HanWords))] + bm25HanWords[r.IntN(len(bm25HanWords))] + "查询" + bm25HanWords[r.IntN(len(bm25HanWords))]
		}
		tools[i] = bm25Tool(name, desc)
	}
	return tools
}

func BenchmarkBM25Build30k(b *testing.B) {
	lib := bm25Library(30000, 1)
	b.ReportAllocs()
	for b.Loop() {
		NewToolBM25(lib)
	}
}

func BenchmarkBM25Search30k(b *testing.B) {
	lib := bm25Library(30000, 1)
	ix := NewToolBM25(lib)
	queries := []string{
		"What is the weather forecast for my city tomorrow?",
		"Convert 100 euros to dollars at the current exchange rate",
		"我想查询明天的天气和航班价格",
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ix.Search(queries[i%len(queries)], 5)
		i++
	}
}

func BenchmarkBM25Rank20(b *testing.B) {
	lib := bm25Library(20, 2)
	q := "Convert 100 euros to dollars at the current exchange rate"
	b.ReportAllocs()
	for b.Loop() {
		NewToolBM25(lib).Rank(q)
	}
}
