package toollib

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/stages/record"
)

// Okapi BM25 parameters. 1.2 and 0.75 are the values of Robertson & Zaragoza
// (2009), which Tool-DC (seed 003 §3.2.1) uses as its retriever.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// A BM25 index ranks a fixed list of documents against free-text queries
// with Okapi BM25 (k1 = 1.2, b = 0.75) over the terms of Tokenize.
//
// The inverse document frequency is the non-negative variant
// ln(1 + (N − n + 0.5) / (n + 0.5)), so a term found in every document still
// counts a little and no score is negative. Each distinct query term counts
// once, however often the query repeats it. An index is immutable after
// NewBM25 and safe for concurrent use.
type BM25 struct {
	postings map[string][]posting
	docLen   []float64
	avgLen   float64
}

type posting struct {
	doc int32
	tf  int32
}

// A Hit is one ranked document: its index in the indexed list (for BM25, the
// docs given to NewBM25) and its score.
type Hit struct {
	Doc   int
	Score float64
}

// NewBM25 indexes docs; document i is addressed as Hit.Doc == i.
func NewBM25(docs []string) *BM25 {
	ix := &BM25{postings: make(map[string][]posting), docLen: make([]float64, len(docs))}
	tf := make(map[string]int32)
	var total float64
	for i, d := range docs {
		clear(tf)
		terms := Tokenize(d)
		for _, t := range terms {
			tf[t]++
		}
		// Postings are appended in document order, so every list is sorted by
		// document; the term order inside one document does not matter.
		for t, n := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), tf: n})
		}
		ix.docLen[i] = float64(len(terms))
		total += float64(len(terms))
	}
	if len(docs) > 0 {
		ix.avgLen = total / float64(len(docs))
	}
	return ix
}

// NewToolBM25 indexes tools by their name and description, the text a
// retriever sees of a tool (seed 003 §3.2.1). Snake_case and camelCase names
// split into their words.
func NewToolBM25(tools []record.Tool) *BM25 {
	docs := make([]string, len(tools))
	for i, t := range tools {
		docs[i] = ToolText(t)
	}
	return NewBM25(docs)
}

// ToolText is the text BM25 indexes for a tool: its name, then its description.
func ToolText(t record.Tool) string { return t.Name + " " + t.Description }

// Len is the number of indexed documents.
func (ix *BM25) Len() int { return len(ix.docLen) }

// Rank returns every document, best first: by score descending, then by
// document index ascending, so documents that share no term with the query
// keep their original order at the end.
func (ix *BM25) Rank(query string) []Hit {
	scores := make([]float64, len(ix.docLen))
	ix.accumulate(query, func(doc int32, s float64) { scores[doc] += s })
	all := make([]Hit, len(scores))
	for i, s := range scores {
		all[i] = Hit{Doc: i, Score: s}
	}
	slices.SortStableFunc(all, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	return all
}

// Search returns up to k documents with a positive score, ordered as Rank
// orders them. Scoring walks only the postings of the query's terms, and
// selection keeps a heap of k, so it suits large indexes (a run's whole tool
// library).
func (ix *BM25) Search(query string, k int) []Hit {
	if k <= 0 {
		return nil
	}
	scores := make([]float64, len(ix.docLen))
	ix.accumulate(query, func(doc int32, s float64) { scores[doc] += s })
	h := make(scoreHeap, 0, k)
	for doc, s := range scores {
		if s <= 0 {
			continue
		}
		ds := Hit{Doc: doc, Score: s}
		if len(h) < k {
			heap.Push(&h, ds)
		} else if outranks(ds, h[0]) {
			h[0] = ds
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, func(a, b Hit) int {
		if outranks(a, b) {
			return -1
		}
		return 1
	})
	return h
}

// accumulate calls add with the contribution of every distinct query term to
// every document holding it.
func (ix *BM25) accumulate(query string, add func(doc int32, s float64)) {
	n := float64(len(ix.docLen))
	avg := ix.avgLen
	if avg == 0 {
		avg = 1
	}
	seen := make(map[string]bool)
	for _, t := range Tokenize(query) {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*ix.docLen[p.doc]/avg)
			add(p.doc, idf*tf*(bm25K1+1)/(tf+norm))
		}
	}
}

// outranks orders documents: higher score first, then lower document index.
func outranks(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Doc < b.Doc
}

// scoreHeap is a min-heap under outranks: its root is the worst document kept.
type scoreHeap []Hit

func (h scoreHeap) Len() int           { return len(h) }
func (h scoreHeap) Less(i, j int) bool { return outranks(h[j], h[i]) }
func (h scoreHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *scoreHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *scoreHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Tokenize splits text into BM25 terms:
//   - a run of letters and digits outside the Han script is a word, lowercased;
//     a lowercase letter or digit followed by an uppercase letter starts a new
//     word, so "getWeatherByCity" gives get, weather, by, city. Everything else
//     (spaces, punctuation, "_", "-") separates words.
//   - a run of Han characters gives each character (unigram) and each pair of
//     adjacent characters (bigram), in reading order: "天气预报" gives
//     天, 天气, 气, 气预, 预, 预报, 报. Chinese is written without spaces, and
//     unigrams plus bigrams is the usual dictionary-free way to index it.
//     Han-script characters that are not letters (the Kangxi and CJK
//     radicals, 〇 and the Suzhou numerals) separate words like punctuation.
//
// There is no stemming and no stop-word list.
func Tokenize(text string) []string {
	var out []string
	wordStart := -1 // byte offset of the word being read, or -1
	var prevHan rune = -1
	var prev rune
	flushWord := func(end int) {
		if wordStart >= 0 {
			out = append(out, strings.ToLower(text[wordStart:end]))
			wordStart = -1
		}
	}
	for i, r := range text {
		switch {
		case unicode.Is(unicode.Han, r) && unicode.IsLetter(r):
			flushWord(i)
			if prevHan >= 0 {
				out = append(out, string([]rune{prevHan, r}))
			}
			out = append(out, string(r))
			prevHan = r
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			prevHan = -1
			if wordStart >= 0 && unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
				flushWord(i)
			}
			if wordStart < 0 {
				wordStart = i
			}
		default:
			prevHan = -1
			flushWord(i)
		}
		prev = r
	}
	flushWord(len(text))
	return out
}
