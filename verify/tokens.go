package verify

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/record"
)

// TokenEncoding is the BPE that Tokens counts with. It is OpenAI's, not the
// trained model's (Llama, Qwen): counts are for budgets and length filters,
// typically within 10–20% of the student's tokenizer on English and JSON.
const TokenEncoding = "o200k_base"

// encoder loads the BPE once, from tables compiled into the binary (no
// network). tiktoken-go/tokenizer counts the same tokens as the reference
// tiktoken-go and is about 2.7 times faster here.
var encoder = sync.OnceValue(func() tokenizer.Codec {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		// The tables are compiled in; failing to load them is a build
		// defect, not a data problem.
		panic("verify: loading the " + TokenEncoding + " tables: " + err.Error())
	}
	return enc
})

// Tokens counts the tokens of text in the o200k_base encoding. Special-token
// text such as "<|endoftext|>" is counted as ordinary text. Safe for
// concurrent use; the first call loads the tables.
//
// The text is cut into the pieces of the encoding's pre-tokenizer
// (o200kPiece, linear in the text) and each piece is merged apart, as the
// library does; a piece's count is remembered (pieceCounts), since words
// repeat and the merge is most of the cost. That is the library's count of
// the whole text. Two kinds of text are counted as before instead, in
// chunks of at most tokenChunk bytes (countChunked): text that is not
// valid UTF-8 (the library counts it with U+FFFD in place of bad bytes),
// and text holding a run of more than tokenChunk bytes that the
// pre-tokenizer keeps as one piece (one long word, number or symbol run),
// which is cut every tokenChunk bytes, which may shift the count by a
// token per cut: the library's merge is superlinear on such runs (a 50 MB
// row took seconds per megabyte). The chunks of valid UTF-8 are counted
// piece by piece too (a chunk is valid UTF-8, so that is the library's
// count of the chunk).
func Tokens(text string) int {
	if text == "" {
		return 0 // most records' reasoning
	}
	if len(text) > tokenChunk {
		switch {
		case !utf8.ValidString(text):
			n, _ := countChunked(text, tokenChunk, libraryCount)
			return n
		case forcedCut(text, tokenChunk):
			n, _ := countChunked(text, tokenChunk, countPieces)
			return n
		}
		return countPieces(text)
	}
	if n, ok := countUTF8(text); ok {
		return n
	}
	n, _ := countChunked(text, tokenChunk, libraryCount)
	return n
}

// LoadTokens loads the tables Tokens counts with, which its first call
// otherwise does (some 30 ms of one CPU): a caller can so load them at a
// moment of its choosing, in the background while a CPU is idle.
func LoadTokens() { ranks() }

// libraryCount is the library's count of text (0 if it fails, which it
// does not in its default error mode).
func libraryCount(text string) int {
	n, _ := encoder().Count(text)
	return n
}

const tokenChunk = 4096

// forcedCut reports whether countChunked(text, size) cuts text somewhere
// the pre-tokenizer does not always split. Where it does not, countChunked
// counts exactly the library's count, and so does countPieces.
func forcedCut(text string, size int) bool {
	for len(text) > size {
		cut, ok := safeCut(text, size)
		if !ok {
			return true
		}
		text = text[cut:]
	}
	return false
}

// pieceCounts remembers the token count of pieces: of up to
// pieceCountsMax pieces of at most pieceCountMax bytes (a few tens of MB
// at most; a dataset's vocabulary of pieces is far smaller), and of longer
// pieces (runs of Chinese characters, long identifiers) up to
// longPiecesMax bytes of them, so that a long piece no word of the
// vocabulary crowds out is not merged again each time a text holds it.
// Pieces of at most smallPieceMax bytes (most words, numbers and symbol
// runs) are kept in small (a strTable), which is cheaper to look up; a
// piece of one byte is one token (every ASCII character is a token of its
// own) and is not looked up at all.
var pieceCounts struct {
	sync.RWMutex
	m         map[string]int
	small     strTable
	longBytes int // of the pieces longer than pieceCountMax in m
}

const (
	pieceCountMax  = 64
	pieceCountsMax = 1 << 18
	longPiecesMax  = 8 << 20
	smallPieceMax  = strKeyMax
)

// countPieces counts valid UTF-8 text piece by piece, its pieces at most
// tokenChunk bytes long (see Tokens).
func countPieces(text string) int {
	n, _ := countUTF8(text)
	return n
}

// countUTF8 is countPieces(text) when text is valid UTF-8 (ok), and
// reports when it is not: the pieces of a text cover it but for DEL
// characters, so the text is UTF-8 when each piece is, and a piece
// remembered in pieceCounts is (only such pieces are remembered); the
// other pieces are checked before they are counted.
func countUTF8(text string) (n int, ok bool) {
	var buf [16]string
	missed := buf[:0] // pieces not remembered, counted after the look-ups
	pieceCounts.RLock()
	for i := 0; i < len(text); {
		s := text[i:]
		k, ok := asciiPiece(s), true
		if k == 0 {
			k, ok = anyPiece(s)
		}
		i += k
		if !ok {
			continue // DEL: the library counts no token for it
		}
		var c int
		switch {
		case k == 1:
			if s[0] >= utf8.RuneSelf {
				pieceCounts.RUnlock()
				return 0, false // a byte that starts no character
			}
			n++
			continue
		case k <= smallPieceMax:
			var v uint32
			v, ok = pieceCounts.small.get(strKeyAt(s, k))
			c = int(v)
		default:
			c, ok = pieceCounts.m[s[:k]]
		}
		if ok {
			n += c
		} else {
			missed = append(missed, s[:k])
		}
	}
	pieceCounts.RUnlock()
	if len(missed) == 0 {
		return n, true
	}
	for _, piece := range missed {
		if !utf8.ValidString(piece) {
			return 0, false
		}
	}
	counts := make([]int, len(missed))
	for i, piece := range missed {
		counts[i] = pieceTokens(piece)
		n += counts[i]
	}
	pieceCounts.Lock()
	defer pieceCounts.Unlock()
	if pieceCounts.m == nil {
		pieceCounts.m = map[string]int{}
	}
	for i, piece := range missed {
		if len(pieceCounts.m)+pieceCounts.small.n >= pieceCountsMax && len(piece) <= pieceCountMax {
			continue
		}
		switch {
		case len(piece) <= smallPieceMax:
			if _, ok := pieceCounts.small.get(strKeyOf(piece)); !ok {
				pieceCounts.small.put(strKeyOf(piece), uint32(counts[i]), 0)
			}
		case len(piece) > pieceCountMax && pieceCounts.longBytes+len(piece) > longPiecesMax:
		default:
			if _, ok := pieceCounts.m[piece]; ok {
				continue // counted meanwhile, or twice in this text
			}
			if len(piece) > pieceCountMax {
				pieceCounts.longBytes += len(piece)
			}
			// A copy: the text may live in a buffer its owner reuses.
			pieceCounts.m[strings.Clone(piece)] = counts[i]
		}
	}
	return n, true
}

// countChunked counts text with count in pieces of at most size bytes,
// cut at character boundaries; forced reports a cut where the
// pre-tokenizer does not always split.
//
// A piece equal to the one before is not counted again: a run of one
// repeated character is many equal pieces.
func countChunked(text string, size int, count func(string) int) (n int, forced bool) {
	var last string
	lastN := 0
	for text != "" {
		cut := len(text)
		if cut > size {
			var ok bool
			cut, ok = safeCut(text, size)
			forced = forced || !ok
		}
		if piece := text[:cut]; piece != last {
			last, lastN = piece, count(piece)
		}
		n += lastN
		text = text[cut:]
	}
	return n, forced
}

// safeCut returns where to cut text, which is longer than size: the last
// place before size, and after its start, before which o200k_base's
// pre-tokenizer always ends a piece and after which it always starts one,
// so that counting the two parts apart counts the same tokens (ok). The
// places are, with a the character before and b the one after:
//   - b is a space and a is not white space: a piece holds a space only at
//     its start, and a piece ending at a stops the same way at a space as at
//     the end of the text;
//   - a is a letter or digit and b is neither white space, nor a letter,
//     digit or combining mark, nor an apostrophe (which may start a
//     contraction suffix: 's, 't, …): a letter or digit run stops there;
//   - a is '\n' and b is neither white space nor '/' (a symbol run's piece
//     takes the line breaks and slashes that follow it).
//
// Without such a place, the text starts with a run longer than size that
// the pre-tokenizer keeps as one piece; the cut is the last character
// boundary before size, and ok is false.
func safeCut(text string, size int) (cut int, ok bool) {
	for i := size; i > 0; {
		if b, a := text[i], text[i-1]; b|a < utf8.RuneSelf {
			if asciiCut(a, b) {
				return i, true
			}
			i--
			continue
		}
		if !utf8.RuneStart(text[i]) {
			i--
			continue
		}
		a, n := utf8.DecodeLastRuneInString(text[:i])
		b, _ := utf8.DecodeRuneInString(text[i:])
		if cutBetween(a, b) {
			return i, true
		}
		i -= n
	}
	i := size
	for i > 1 && !utf8.RuneStart(text[i]) {
		i--
	}
	return i, false
}

// asciiCut is cutBetween(a, b) for two ASCII characters, from their
// classes.
func asciiCut(a, b byte) bool {
	ca, cb := asciiClass[a], asciiClass[b]
	switch {
	case b == ' ':
		return ca&aSpace == 0
	case ca&(aUpper|aLower|aDigit) != 0:
		return cb&(aSpace|aUpper|aLower|aDigit) == 0 && b != '\''
	case a == '\n':
		return cb&aSpace == 0 && b != '/'
	}
	return false
}

func cutBetween(a, b rune) bool {
	switch {
	case b == ' ':
		return !isSpace(a)
	case isLetter(a) || isNumber(a):
		return !isSpace(b) && !isLetter(b) && !isNumber(b) && !isMark(b) && b != '\''
	case a == '\n':
		return !isSpace(b) && b != '/'
	}
	return false
}

// Per-message framing of chat templates (role header and end marker) and
// the reply primer, as in OpenAI's published counting recipe.
const (
	tokensPerMessage = 3
	tokensReply      = 3
)

// RecordTokens counts a whole record as a chat model would see it, by
// OpenAI's recipe: each message costs tokensPerMessage plus its role and its
// text; the system message holds the system prompt followed by the tools as
// a compact JSON list of {"name", "description", "parameters"[, "response"]}
// (the response schema when the tool has one, as the export writes it); an assistant
// turn's text is its reasoning, content and each call as compact JSON
// {"name", "arguments"}; a tool turn's text is its results' contents; the
// reply primer adds tokensReply. Template-specific text (a tool format's
// prose, tools wrapped and indented, default system prompts, <tool_call>
// tags) is not counted: LLaMA-Factory's rendering of a sample is often half
// as long again (LFTemplate.SampleTokens counts it).
func RecordTokens(r *record.Record) int {
	return recordTokens(r, Tokens, func(r *record.Record) int { return Tokens(systemText(r)) },
		func(c *record.Call) int { return Tokens(callJSON(*c)) })
}

// recordTokens counts r with count for its texts, system for the text of
// its system message (systemText), which is called only for a record with
// a system prompt or tools, and call for the text of a call (callJSON).
func recordTokens(r *record.Record, count func(string) int, system func(*record.Record) int, call func(*record.Call) int) int {
	n := tokensReply
	if r.System != "" || len(r.Tools) > 0 {
		n += tokensPerMessage + count(record.RoleSystem) + system(r)
	}
	for _, m := range r.Messages {
		n += tokensPerMessage + count(m.Role) + count(m.Content) + count(m.Reasoning)
		for i := range m.Calls {
			n += call(&m.Calls[i])
		}
		for _, res := range m.Results {
			n += count(res.Content)
		}
	}
	return n
}

// A TokenMemo counts like Tokens and RecordTokens and remembers the count
// of each text it saw, for callers that count the same texts again and
// again: a run's report counts a sample of each stage's records, the same
// records (sampled by ID) with mostly the same texts at every stage, and
// records of one dataset share their tool lists. It keeps a copy of each
// text up to memoTextMax bytes, memoBudget bytes in all; longer texts, and
// texts once the budget is spent, are counted every time. The text of a
// record's system message is remembered under the record's system prompt
// and tools (the fields systemText writes), so that a record whose tools
// were seen before is neither written out nor looked up as text; a new
// system message is counted tool by tool (systemCount), each tool's part
// remembered under its name, description, parameters and response, since drawn tool
// lists (meta_tool's) rarely repeat but their tools do; a call's text is
// remembered under its name and arguments. Texts, tools and calls are
// found by a hash of their bytes and compared whole: two with the same
// hash are both counted right (the second every time). The zero value is
// ready; safe for concurrent use.
type TokenMemo struct {
	mu      sync.Mutex
	texts   map[uint64]memoText
	systems map[uint64]memoSystem
	tools   map[uint64]*memoTool
	calls   map[uint64]memoCall
	used    int
}

type memoCall struct {
	name string
	args []byte
	n    int
}

// memoTool is the count of a tool's part of system texts (toolPart), as
// the last tool of the list and as one followed by another; -1 when not
// counted yet, -2 when the part cannot be counted on its own.
type memoTool struct {
	tool record.Tool
	n    [2]int
}

type memoText struct {
	text string
	n    int
}

type memoSystem struct {
	system string
	tools  []record.Tool
	n      int
}

const (
	memoTextMax = 64 << 10
	memoBudget  = 64 << 20
)

// memoSeed seeds the memos' hashes (which only find texts, never decide a
// count: the texts are compared).
var memoSeed = maphash.MakeSeed()

// Tokens is Tokens(text), remembered (by a nil memo: not remembered).
func (t *TokenMemo) Tokens(text string) int {
	if t == nil || text == "" || len(text) > memoTextMax {
		return Tokens(text)
	}
	h := maphash.String(memoSeed, text)
	e, ok := memoGet(t, &t.texts, h)
	if ok && e.text == text {
		return e.n
	}
	n := Tokens(text)
	if !ok {
		memoPut(t, &t.texts, h, len(text), func() memoText { return memoText{strings.Clone(text), n} })
	}
	return n
}

// memoGet returns the entry under key in the memo's map *m.
func memoGet[E any](t *TokenMemo, m *map[uint64]E, key uint64) (E, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := (*m)[key]
	return e, ok
}

// memoPut puts entry() under key in the memo's map *m, counting size bytes
// against the memo's budget, unless the key is taken or the budget spent.
// entry copies what it keeps: a text may live in a buffer its owner reuses.
func memoPut[E any](t *TokenMemo, m *map[uint64]E, key uint64, size int, entry func() E) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := (*m)[key]; ok || t.used+size > memoBudget {
		return
	}
	if *m == nil {
		*m = map[uint64]E{}
	}
	(*m)[key] = entry()
	t.used += size
}

// RecordTokens is RecordTokens(r), its texts' counts remembered.
func (t *TokenMemo) RecordTokens(r *record.Record) int {
	if t == nil {
		return RecordTokens(r)
	}
	return recordTokens(r, t.Tokens, t.systemTokens, t.callTokens)
}

// callTokens is Tokens(callJSON(*c)), remembered under the call's name and
// arguments, so that a call seen before is not written out as JSON again.
func (t *TokenMemo) callTokens(c *record.Call) int {
	size := len(c.Name) + len(c.Arguments) + 32
	if size > memoTextMax {
		return Tokens(callJSON(*c))
	}
	var h maphash.Hash
	h.SetSeed(memoSeed)
	var n8 [8]byte // the name's length, so that no two calls hash the same bytes
	binary.LittleEndian.PutUint64(n8[:], uint64(len(c.Name)))
	h.Write(n8[:])
	h.WriteString(c.Name)
	h.Write(c.Arguments)
	key := h.Sum64()
	e, ok := memoGet(t, &t.calls, key)
	if ok && e.name == c.Name && bytes.Equal(e.args, c.Arguments) {
		return e.n
	}
	n := Tokens(callJSON(*c))
	if !ok {
		memoPut(t, &t.calls, key, size, func() memoCall {
			return memoCall{strings.Clone(c.Name), slices.Clone(c.Arguments), n}
		})
	}
	return n
}

// systemTokens is Tokens(systemText(r)), remembered under r's system
// prompt and tools.
func (t *TokenMemo) systemTokens(r *record.Record) int {
	key, size := systemKey(r)
	e, ok := memoGet(t, &t.systems, key)
	if ok && e.system == r.System && sameTools(e.tools, r.Tools) {
		return e.n
	}
	n := t.systemCount(r)
	if !ok && size <= memoTextMax {
		memoPut(t, &t.systems, key, size, func() memoSystem {
			tools := make([]record.Tool, len(r.Tools))
			for i, tool := range r.Tools {
				tools[i] = tool.Owned()
			}
			return memoSystem{strings.Clone(r.System), tools, n}
		})
	}
	return n
}

// systemCount is Tokens(systemText(r)), counted in parts: the system
// prompt with the start of the list up to the first "name", then each
// tool's part (toolPart) through its follower's "name", each remembered.
// The parts are cut after the "name" of a `{"name":`, a letter before a
// quote, where o200k_base's pre-tokenizer always ends a piece and starts
// another (safeCut), so the pieces of the parts are the pieces of the
// whole text and their counts add up to its count. That holds when
// Tokens counts the whole piece by piece: when it is UTF-8 (each part is)
// and no run of more than tokenChunk bytes lacks such a place (no part is
// longer than tokenChunk); otherwise the whole text is counted.
func (t *TokenMemo) systemCount(r *record.Record) int {
	if len(r.Tools) == 0 {
		return Tokens(systemText(r))
	}
	var buf [256]byte
	head := append(buf[:0], r.System...)
	if r.System != "" {
		head = append(head, "\n\n"...)
	}
	head = append(head, `[{"name`...)
	if len(head) > tokenChunk || !utf8.Valid(head) {
		return Tokens(systemText(r))
	}
	n := t.Tokens(string(head)) // countPieces' count: head is UTF-8 and short
	for i := range r.Tools {
		c := t.toolTokens(&r.Tools[i], i == len(r.Tools)-1)
		if c < 0 {
			return Tokens(systemText(r))
		}
		n += c
	}
	return n
}

// toolPart is tool's part of a system text, `":` and the rest of its
// object as systemText writes it, then `]` for the last tool, else the
// start of the next, `,{"name`.
func toolPart(dst []byte, tool *record.Tool, last bool) []byte {
	dst = append(dst, `":`...)
	dst = jsonout.AppendString(dst, tool.Name)
	dst = append(dst, `,"description":`...)
	dst = jsonout.AppendString(dst, tool.Description)
	dst = append(dst, `,"parameters":`...)
	dst = appendRawOrString(dst, tool.Parameters)
	dst = appendResponse(dst, tool.Response)
	if last {
		return append(dst, "}]"...)
	}
	return append(dst, `},{"name`...)
}

// toolTokens is the token count of toolPart(tool, last), remembered, or
// -1 when the part is no piece-by-piece count (not UTF-8, or longer than
// tokenChunk: see systemCount).
func (t *TokenMemo) toolTokens(tool *record.Tool, last bool) int {
	var h maphash.Hash
	h.SetSeed(memoSeed)
	h.WriteString(tool.Name)
	h.WriteByte(0)
	h.WriteString(tool.Description)
	h.WriteByte(0)
	h.Write(tool.Parameters)
	h.WriteByte(0)
	h.Write(tool.Response)
	key := h.Sum64()
	end := 0
	if last {
		end = 1
	}
	t.mu.Lock()
	e := t.tools[key]
	same := e != nil && e.tool.Equal(tool)
	if same && e.n[end] != -1 {
		n := e.n[end]
		t.mu.Unlock()
		return max(n, -1)
	}
	t.mu.Unlock()
	part := toolPart(make([]byte, 0, len(tool.Name)+len(tool.Description)+len(tool.Parameters)+len(tool.Response)+64), tool, last)
	n := -2
	if len(part) <= tokenChunk && utf8.Valid(part) {
		n = countPieces(string(part))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch size := len(tool.Name) + len(tool.Description) + len(tool.Parameters) + len(tool.Response) + 64; {
	case same:
		e.n[end] = n
	case e == nil && t.used+size <= memoBudget:
		if t.tools == nil {
			t.tools = map[uint64]*memoTool{}
		}
		if _, ok := t.tools[key]; !ok {
			e := &memoTool{tool: tool.Owned(), n: [2]int{-1, -1}}
			e.n[end] = n
			t.tools[key] = e
			t.used += size
		}
	}
	return max(n, -1)
}

// systemKey is the memo's key for a record's system text (a hash of the
// system prompt and each tool's name, description, parameters and
// response) and the bytes the memo keeps of the record (those fields).
func systemKey(r *record.Record) (key uint64, size int) {
	var h maphash.Hash
	h.SetSeed(memoSeed)
	h.WriteString(r.System)
	size = len(r.System)
	for _, tool := range r.Tools {
		h.WriteByte(0)
		h.WriteString(tool.Name)
		h.WriteByte(0)
		h.WriteString(tool.Description)
		h.WriteByte(0)
		h.Write(tool.Parameters)
		h.WriteByte(0)
		h.Write(tool.Response)
		size += len(tool.Name) + len(tool.Description) + len(tool.Parameters) + len(tool.Response)
	}
	return h.Sum64(), size
}

// sameTools reports whether two tool lists are the same definitions.
func sameTools(a, b []record.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y record.Tool) bool { return x.Equal(&y) })
}

// systemText is the text of a record's system message as a chat template
// shows it: the system prompt, then the tools as a compact JSON list of
// {name, description, parameters[, response]}, response (a tool's response
// schema, e.g. from response_schema) when it has one, as the export writes
// the tools (stages.toolsJSON): what the model reads counts.
func systemText(r *record.Record) string {
	if len(r.Tools) == 0 {
		return r.System
	}
	b := make([]byte, 0, len(r.System)+2+64*len(r.Tools))
	if r.System != "" {
		b = append(append(b, r.System...), "\n\n"...)
	}
	b = append(b, '[')
	for i, t := range r.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = jsonout.AppendString(b, t.Name)
		b = append(b, `,"description":`...)
		b = jsonout.AppendString(b, t.Description)
		b = append(b, `,"parameters":`...)
		b = appendRawOrString(b, t.Parameters)
		b = appendResponse(b, t.Response)
		b = append(b, '}')
	}
	return string(append(b, ']'))
}

// appendResponse appends `,"response":` and a tool's response schema
// (compact; a JSON string if it is not JSON) when it has one: empty or
// blank is none, as the export reads it.
func appendResponse(dst, resp []byte) []byte {
	resp = bytes.TrimSpace(resp)
	if len(resp) == 0 {
		return dst
	}
	return appendRawOrString(append(dst, `,"response":`...), resp)
}

// rawOrString keeps valid JSON as it is and turns anything else into a JSON
// string, so that marshalling never fails on bad data.
func rawOrString(b []byte) any {
	if len(b) == 0 {
		return map[string]any{}
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}
