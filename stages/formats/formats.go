package formats

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/swar"
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// Formats lists the supported format names, the values of a source's
// format: in pipeline.yaml.
func Formats() []string { return []string{"toolace", "glaive", "xlam", "sharegpt", "openai"} }

// reject returns the *contract.Reject a row that cannot become a record
// gives; the runner keeps the raw row in the rejects file under reason.
func reject(reason, format string, args ...any) *contract.Reject {
	return &contract.Reject{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Parse turns one raw row (the bytes a Scanner returned) into a record of
// the given format. The record's ID is source + ":" + index; Lineage is left
// empty. A row that cannot be read faithfully gives a *contract.Reject; an
// unknown format name gives a plain error, since it concerns the whole
// source rather than the row. Parse keeps no reference to row and is safe
// for concurrent use.
//
// Contract: when source is valid UTF-8, every record Parse returns passes
// shard.Check, so the runner writes it without checking it again. Its text
// is valid UTF-8 (jsontree decodes each string so, invalid bytes and lone
// surrogates repaired to U+FFFD; the readers cut it only at ASCII bytes,
// and pycall decodes Python literals to runes), and its JSON fields are
// compact JSON as jsontree.AppendCompact writes it (values decoded from
// the row, written as read by Inner's and Laid's AppendValue, or built by
// pycall and the schema normaliser with numbers in JSON's grammar). The fuzz targets (checkInvariants) and
// TestParseOutputPassesCheck hold every reader to it: a reader that can
// return text or JSON of another kind must repair it or reject the row.
func Parse(format, source string, index int64, row []byte) (*record.Record, error) {
	return parse(format, source, index, row, laidOut)
}

// passes says how parse decodes the JSON texts xlam holds in strings, and
// glaive's and ToolACE's tools in their system texts.
type passes uint8

const (
	twoPasses passes = iota // in passes of their own, after the row's
	onePass                 // xlam's in the row parser's pass (jsontree.Parser.Embedded); the others as twoPasses
	direct                  // tools (and xlam's answers) read straight into the record (xlamLiteral, systemLiteral), else onePass
	laidOut                 // as direct, xlam's read by their layout first (laidTools, laidCalls), else as direct; glaive's responses and call arguments and ToolACE's tool turns compacted without a tree first (flatText, flatObject, flatResults), else as direct
)

// parse is Parse; how says how the JSON texts xlam holds in strings, and
// the tools in glaive's and ToolACE's system texts, are read (see passes),
// which the fuzz targets compare.
func parse(format, source string, index int64, row []byte, how passes) (*record.Record, error) {
	if !slices.Contains(Formats(), format) {
		return nil, fmt.Errorf("formats: unknown format %q (want one of %s)", format, strings.Join(Formats(), ", "))
	}
	// The trees of the row and of the JSON texts inside it are decoded
	// into one arena, and the record's JSON texts written to one buffer,
	// both reused by the next Parse: no record keeps a Value, and the
	// texts are copied out (keepJSON).
	w := workspaces.Get().(*workspace)
	defer func() {
		w.arena.Reset()
		w.json = w.json[:0]
		clear(w.turns) // no references into the row's text
		w.turns = w.turns[:0]
		w.rowTools = nil
		w.xlamCalls, w.haveCalls = nil, false
		w.xlam = nil
		w.laid = false
		if cap(w.json) <= 1<<20 {
			workspaces.Put(w)
		}
	}()
	// The Scanner reuses row, so strings are copied out of it.
	jp := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena}
	w.laid = how == laidOut
	switch {
	case format == "xlam" && how >= onePass:
		jp.Embedded = xlamEmbedded
		if how >= direct {
			jp.Literal = w.literal
		}
	case (format == "glaive" || format == "toolace") && how >= direct:
		w.format = format
		jp.Hooked, jp.Literal = systemKey, w.sysLiteral
	}
	// The record and room for its first tags in one allocation (with an
	// xlam record's lists, which its readers fill as they read the row),
	// its ID in one more.
	var rt *recordTags
	if format == "xlam" {
		w.xlam = new(xlamRecord)
		rt = &w.xlam.recordTags
	} else {
		rt = new(recordTags)
	}
	v, err := jp.Parse()
	if err != nil {
		return nil, jsonReject("bad_json", "row", row, err)
	}
	if v.Kind != jsontree.Object {
		return nil, reject("row_not_object", "the row is a JSON %s, want an object", v.Kind)
	}
	id := append(make([]byte, 0, 64), source...)
	id = strconv.AppendInt(append(id, ':'), index, 10)
	rt.rec = record.Record{
		ID:       string(id),
		Source:   source,
		Format:   format,
		Row:      index,
		Tools:    []record.Tool{},
		Messages: []record.Message{},
		Tags:     rt.tags[:0],
	}
	b := &builder{w: w, rec: &rt.rec, row: row, replaced: jp.BadUTF8 || jp.LoneSurrogate}
	if jp.BadUTF8 {
		b.repair("invalid_utf8")
	}
	if jp.LoneSurrogate {
		b.repair("lone_surrogate")
	}
	// Called directly rather than through a func value, so that the row's
	// tree and the builder can stay on the stack.
	switch format {
	case "toolace":
		err = parseToolACE(b, &v)
	case "glaive":
		err = parseGlaive(b, &v)
	case "xlam":
		err = parseXLAM(b, &v)
	case "sharegpt":
		err = parseShareGPT(b, &v)
	case "openai":
		err = parseOpenAI(b, &v)
	}
	if err != nil {
		return nil, err
	}
	if err := b.finish(); err != nil {
		return nil, err
	}
	keepJSON(b.rec, &jp)
	return b.rec, nil
}

// keepJSON moves the record's JSON texts (tool parameters, call arguments),
// which may lie in the workspace's buffer, into one block: the free part
// of the block the row's strings were copied into when it has room
// (jsontree.Parser.Block), else one of their own.
func keepJSON(r *record.Record, jp *jsontree.Parser) {
	n := 0
	for i := range r.Tools {
		n += len(r.Tools[i].Parameters)
	}
	for i := range r.Messages {
		for _, c := range r.Messages[i].Calls {
			n += len(c.Arguments)
		}
	}
	block := jp.Block(n)
	keep := func(t []byte) []byte {
		if t == nil {
			return nil
		}
		at := len(block)
		block = append(block, t...)
		return block[at:len(block):len(block)]
	}
	for i := range r.Tools {
		r.Tools[i].Parameters = keep(r.Tools[i].Parameters)
	}
	for i := range r.Messages {
		for j := range r.Messages[i].Calls {
			c := &r.Messages[i].Calls[j]
			c.Arguments = keep(c.Arguments)
		}
	}
}

// recordTags is a record with room for the tags most records get (the
// format's id, lang, repairs).
type recordTags struct {
	rec  record.Record
	tags [3]record.Tag
}

// xlamRecord is an xlam record with room for its lists as most xlam
// rows make them: the query and the assistant turn, one call, one tool.
type xlamRecord struct {
	recordTags
	msgs  [2]record.Message
	calls [1]record.Call
	tools [1]record.Tool
}

// A builder collects a record and the repairs made while reading it.
type builder struct {
	rec     *record.Record
	repairs []string
	w       *workspace
	// row is the row's JSON; replaced reports that decoding it (not the
	// JSON texts inside its strings) already replaced something by U+FFFD.
	row      []byte
	replaced bool
}

// A workspace holds what Parse reuses from row to row: the arena for the
// trees decoded while reading a row, the buffer the record's JSON texts
// are written to (compact) until keepJSON copies them out, and glaive's
// turns. The readers' helpers take a nil *workspace when they work
// outside Parse.
type workspace struct {
	arena jsontree.Arena
	json  []byte
	turns []glaiveTurn // glaive's chat cut into turns

	// The tools a Literal hook read straight from the row (xlamLiteral,
	// systemLiteral): never nil when it did, nil when the reader takes
	// them from the row's tree.
	rowTools []record.Tool

	// xlam's tool list and answers read straight from the row
	// (xlamtools.go): the hook, the answers when haveCalls, and its
	// scratch lists.
	literal   func(string, jsontree.Inner) (jsontree.Value, bool)
	xlamCalls []record.Call // answers, when haveCalls
	haveCalls bool
	xlam      *xlamRecord // the xlam record being read, whose lists the readers fill
	tools     []record.Tool
	req       []string
	types     map[string]typeRewrite // see appendType

	// The tools laidTool read, by name, those readSchemaTool read, by
	// the start of their text (at the top of the text, and in a list),
	// and the bytes they hold.
	toolMemo      map[string][]memoTool
	schemaMemo    [2]map[string][]memoTool
	toolMemoBytes int

	// glaive's and ToolACE's tools read straight from the system text
	// (systools.go): the hook and the format it reads.
	sysLiteral func(string, jsontree.Inner) (jsontree.Value, bool)
	format     string

	// laid (Parse's way, laidOut): the readers try their tree-less way
	// first: xlam's texts by json.dumps's layout (laidTools, laidCalls),
	// the JSON texts glaive's and ToolACE's readers only compact with
	// AppendValue (flatText, flatObject, flatResults).
	laid bool
}

var workspaces = sync.Pool{New: func() any {
	w := new(workspace)
	w.literal = w.xlamLiteral
	w.sysLiteral = w.systemLiteral
	return w
}}

// callList returns an empty list for a record's calls: the xlam record's
// room for one, or nil.
func (w *workspace) callList() []record.Call {
	if w.xlam != nil {
		return w.xlam.calls[:0:1]
	}
	return nil
}

// tookCalls ends a reading of the record's calls into callList's list:
// when ok, they are the record's. The xlam record's room is cleared when
// the calls do not stand in it (the reader gave up, or outgrew it): what
// a reader wrote there is a view of the row or of the workspace's buffer,
// which the record would keep alive.
func (w *workspace) tookCalls(calls []record.Call, ok bool) bool {
	if w.xlam != nil && (!ok || len(calls) == 0 || &calls[0] != &w.xlam.calls[0]) {
		clear(w.xlam.calls[:])
	}
	if ok {
		w.xlamCalls, w.haveCalls = calls, true
	}
	return ok
}

// toolList returns ts copied into a list of its own, the xlam record's
// room for one tool when it fits, never nil (as toolsFromArray makes it).
func (w *workspace) toolList(ts []record.Tool) []record.Tool {
	if w.xlam != nil && len(ts) == 1 {
		l := w.xlam.tools[:1:1]
		l[0] = ts[0]
		return l
	}
	return append(make([]record.Tool, 0, len(ts)), ts...)
}

// compact returns v as compact JSON: in the workspace's buffer, valid until
// Parse returns unless keepJSON copies it out, or, with a nil workspace,
// in a slice of its own.
func (w *workspace) compact(v *jsontree.Value) []byte {
	if w == nil {
		return jsontree.Compact(v)
	}
	at := len(w.json)
	w.json = jsontree.AppendCompact(w.json, v)
	return w.json[at:len(w.json):len(w.json)]
}

// members returns n zero members for a tree built by hand, from the arena
// (valid until Parse returns) or, with a nil workspace, of their own.
func (w *workspace) members(n int) []jsontree.Member {
	if w == nil {
		return make([]jsontree.Member, n)
	}
	return w.arena.Members(n)
}

// parser returns a Parser reading s, without copying it, into the
// builder's arena: its values are valid until Parse returns. s is text of
// the row, which the row's parser decoded as valid UTF-8 (Parse's
// contract), so its strings are not checked again.
func (b *builder) parser(s string) jsontree.Parser {
	p := jsontree.StringParser(s)
	p.Arena = &b.w.arena
	p.ValidUTF8 = true
	return p
}

// parse decodes s, which must hold one JSON value, like parser.
func (b *builder) parse(s string) (jsontree.Value, error) {
	p := b.parser(s)
	return p.Parse()
}

// flatText returns s, when it holds one JSON value, compact as
// jsontree.CompactString gives the tree b.parse(s) reads, read without the
// tree (jsontree.Parser.AppendValue); ok is false when the workspace does
// not read so (laid) or s is not such text, which b.parse then reads.
func (b *builder) flatText(s string) (string, bool) {
	w := b.w
	if w == nil || !w.laid || s == "" {
		return "", false
	}
	p := b.parser(s)
	at := len(w.json)
	out, ok := p.AppendValue(w.json)
	if ok {
		p.SkipSpace()
		ok = p.Pos == len(p.Data)
	}
	var c string
	if ok {
		c = string(out[at:])
	}
	w.json = out[:at]
	return c, ok
}

// flatObject reads the object at p.Pos (after white space) without a tree
// (jsontree.Parser.AppendValue) and returns it compact in the workspace's
// buffer, as objectArguments writes the tree p.Value reads there. It
// returns nil, with p where it was, when the workspace does not read so
// (laid), no object starts there, or p.Value would fail (the caller reads
// it again for the error).
func (b *builder) flatObject(p *jsontree.Parser) []byte {
	w := b.w
	if w == nil || !w.laid {
		return nil
	}
	pos, sq := p.Pos, p.SawSingleQuote
	p.SkipSpace()
	if p.Pos >= len(p.Data) || p.Data[p.Pos] != '{' {
		p.Pos = pos
		return nil
	}
	at := len(w.json)
	out, ok := p.AppendValue(w.json)
	if !ok {
		p.Pos, p.SawSingleQuote = pos, sq
		return nil
	}
	w.json = out
	return out[at:len(out):len(out)]
}

// repair notes that the row was damaged in a known way and fixed; the kinds
// end up, sorted, in the record's "repairs" tag.
func (b *builder) repair(kind string) {
	if !slices.Contains(b.repairs, kind) {
		b.repairs = append(b.repairs, kind)
	}
}

func (b *builder) add(m record.Message) { b.rec.Messages = append(b.rec.Messages, m) }

// last returns the last message, or nil.
func (b *builder) last() *record.Message {
	if n := len(b.rec.Messages); n > 0 {
		return &b.rec.Messages[n-1]
	}
	return nil
}

// finish applies the checks every format shares, duplicate tool
// definitions and calls to undeclared tools, names the results after their
// calls, and sets the tags.
func (b *builder) finish() error {
	r := b.rec
	if err := b.dedupeTools(); err != nil {
		return err
	}
	if err := b.resolveCallNames(); err != nil {
		return err
	}
	var calls []record.Call
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case record.RoleAssistant:
			calls = m.Calls
			for _, c := range calls {
				if n := jsontree.InfiniteNumberIn(c.Arguments); n != "" {
					return reject("number_out_of_range", "turn %d: the arguments of %s hold %s, beyond a float's range: LLaMA-Factory reads it as infinity and writes Infinity, which is not JSON", i, excerpt(c.Name), n)
				}
			}
		case record.RoleTool:
			// The readers pair results with calls one for one; the names
			// follow the calls, which resolveCallNames may have renamed.
			for j := range min(len(m.Results), len(calls)) {
				m.Results[j].Name = calls[j].Name
			}
			calls = nil
		default:
			calls = nil
		}
	}
	if isChinese(r.Messages) {
		r.SetTag("lang", "zh")
	}
	if !b.replaced && b.row != nil {
		// A JSON text or Python call inside a string held half a
		// surrogate pair (the only escape its decoders replace) when
		// what they wrote holds more U+FFFD than the row did, directly
		// or as an escape at any depth.
		if n := decodedReplacements(r); n > 0 && n > writtenReplacements(b.row) {
			b.repair("lone_surrogate")
		}
	}
	if len(b.repairs) > 0 {
		slices.Sort(b.repairs)
		r.SetTag("repairs", strings.Join(b.repairs, ","))
	}
	return nil
}

// decodedReplacements counts the U+FFFD characters in what r holds from
// the JSON texts and Python calls inside the row's strings: its tools,
// calls and results (other texts are the row's strings themselves, whose
// replacements the row's parser reports). A text without the character's
// first byte is passed over at once: most have none.
func decodedReplacements(r *record.Record) int {
	const fffd = "\uFFFD"
	n := 0
	count := func(s string) {
		if strings.IndexByte(s, fffd[0]) >= 0 {
			n += strings.Count(s, fffd)
		}
	}
	countJSON := func(b []byte) {
		if bytes.IndexByte(b, fffd[0]) >= 0 {
			n += bytes.Count(b, []byte(fffd))
		}
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		count(t.Name)
		count(t.Description)
		countJSON(t.Parameters)
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		for _, c := range m.Calls {
			count(c.Name)
			countJSON(c.Arguments)
		}
		for _, res := range m.Results {
			count(res.Name)
			count(res.Content)
		}
	}
	return n
}

// writtenReplacements counts the U+FFFD a row writes: as UTF-8, or as an
// escape \ufffd behind any number of backslashes (in a JSON text held in
// a string, say). Invalid UTF-8 in the row is counted apart (BadUTF8).
func writtenReplacements(row []byte) int {
	n := bytes.Count(row, []byte("\uFFFD"))
	for i := bytes.IndexByte(row, '\\'); i >= 0 && i+6 <= len(row); {
		if row[i+1] == 'u' && strings.EqualFold(string(row[i+2:i+6]), "fffd") {
			n++
		}
		j := bytes.IndexByte(row[i+1:], '\\')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return n
}

// dedupeTools drops exact repeats of a tool definition (repair
// "duplicate_tool") and rejects a name defined twice differently: the calls
// could have been meant for either definition, so no checker downstream
// could hold them to the right one.
func (b *builder) dedupeTools() error {
	ts := b.rec.Tools
	n := 0 // the tools kept so far, ts[:n]; moved only after a repeat
	for i := range ts {
		t := &ts[i]
		dup := false
		for j := range n {
			o := &ts[j]
			if o.Name != t.Name {
				continue
			}
			if o.Description != t.Description || string(o.Parameters) != string(t.Parameters) {
				return reject("duplicate_tool_conflict", "tool %q is defined twice with different definitions", t.Name)
			}
			dup = true
			break
		}
		if dup {
			b.repair("duplicate_tool")
			continue
		}
		if n != i {
			ts[n] = *t
		}
		n++
	}
	b.rec.Tools = ts[:n]
	return nil
}

// resolveCallNames checks that every call names a tool available at its
// turn: a listed tool, or one returned by an earlier meta_tool result (see
// MetaToolResult; augment's own open-world exports). A call whose name
// matches exactly one available tool once case and the separators '-', '.'
// and ' ' are ignored (create_to_do_list for create_to-do_list) is renamed
// to the tool's name (repair "call_name_normalized"); any other unknown name
// is rejected.
func (b *builder) resolveCallNames() error {
	r := b.rec
	avail := r.Tools
	shared := true // avail still aliases r.Tools
	var calls []record.Call
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case record.RoleAssistant:
			for j := range m.Calls {
				if err := b.resolveCall(&m.Calls[j], avail, i); err != nil {
					return err
				}
			}
			calls = m.Calls
		case record.RoleTool:
			for j, res := range m.Results {
				if j >= len(calls) || calls[j].Name != MetaTool {
					continue
				}
				// A result that returns no definition adds nothing; a
				// call of the tool it should have returned is rejected.
				ts, err := MetaToolResult(res.Content)
				if err != nil {
					continue
				}
				if shared {
					avail, shared = slices.Clone(avail), false
				}
				avail = append(avail, ts...)
			}
			calls = nil
		default:
			calls = nil
		}
	}
	return nil
}

// resolveCall checks one call of turn i against the available tools.
func (b *builder) resolveCall(c *record.Call, avail []record.Tool, i int) error {
	if slices.ContainsFunc(avail, func(t record.Tool) bool { return t.Name == c.Name }) {
		return nil
	}
	key, match, n := nameKey(c.Name), "", 0
	for _, t := range avail {
		if nameKey(t.Name) == key && t.Name != match {
			match = t.Name
			n++
		}
	}
	if n != 1 {
		if len(avail) > len(b.rec.Tools) {
			return reject("undeclared_call", "turn %d calls %s, which is neither among the %d listed tools nor returned by meta_tool before", i, excerpt(c.Name), len(b.rec.Tools))
		}
		return reject("undeclared_call", "turn %d calls %s, which is not among the %d listed tools", i, excerpt(c.Name), len(b.rec.Tools))
	}
	c.Name = match
	b.repair("call_name_normalized")
	return nil
}

func nameKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', '.', ' ':
			return '_'
		}
		return unicode.ToLower(r)
	}, s)
}

// isChinese reports whether the user and assistant text is obviously
// Chinese: at least two Han characters, at least a third as many as ASCII
// letters, and (to leave Japanese out) hardly any kana. Han characters are
// counted first; the letters are counted only when there are two Han
// characters (most dumps are mostly English).
func isChinese(ms []record.Message) bool {
	han, kana, size := 0, 0, 0
	for i := range ms {
		if ms[i].Role == record.RoleUser || ms[i].Role == record.RoleAssistant {
			h, k := countHan(ms[i].Content)
			han, kana, size = han+h, kana+k, size+len(ms[i].Content)
		}
	}
	if han < 2 || 10*kana >= han {
		return false
	}
	// A Han character takes three bytes or more and a letter one, so
	// latin ≤ size − 3·han: when that is at most 3·han (Han characters
	// fill half the text or more), the letters need no counting.
	if size-3*han <= 3*han {
		return true
	}
	latin := 0
	for i := range ms {
		if ms[i].Role == record.RoleUser || ms[i].Role == record.RoleAssistant {
			latin += countLatin(ms[i].Content)
		}
	}
	return 3*han >= latin
}

// countLatin counts the ASCII letters of s, eight bytes at a time
// (swar.Letters).
func countLatin(s string) int {
	n, j := 0, 0
	for ; j+8 <= len(s); j += 8 {
		n += swar.Letters(swar.Load(s, j))
	}
	for ; j < len(s); j++ {
		if c := s[j] | 0x20; c >= 'a' && c <= 'z' {
			n++
		}
	}
	return n
}

// countHan counts the Han and the kana characters of s. ASCII is skipped
// eight bytes at a time; a character of three bytes (U+0800–U+FFFF, the
// Han and kana blocks and CJK punctuation) is decoded in place and looked
// up in runeClasses: the unicode tables' searches were the slow part on
// Chinese text. Other characters, and bytes that are not UTF-8, are
// decoded as range does.
func countHan(s string) (han, kana int) {
	class := runeClasses()
	for j := 0; j < len(s); {
		c := s[j]
		if c < utf8.RuneSelf {
			// ASCII: skip the words of it that follow.
			for j++; j+8 <= len(s) && swar.Load(s, j)&swar.Tops == 0; j += 8 {
			}
			continue
		}
		if c&0xF0 == 0xE0 {
			// A run of characters of three bytes, each decoded in
			// place (v: the bytes after the lead without their
			// continuation marks, none left over). An
			// overlong form or a surrogate, which DecodeRune takes for
			// three U+FFFD, is looked up as a rune of class 0 below
			// U+0800 or among the surrogates: the same counts.
			at := j
			for j+3 <= len(s) {
				t := s[j : j+3]
				v := (uint16(t[1]) | uint16(t[2])<<8) ^ 0x8080
				if t[0]&0xF0 != 0xE0 || v&0xC0C0 != 0 {
					break
				}
				k := class[uint16(t[0]&0x0F)<<12|v<<6&0xFC0|v>>8]
				han += int(k & classHan)
				kana += int(k >> 1)
				j += 3
			}
			if j > at {
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		j += n
		switch {
		case r < 0x2E80: // below the first Han and kana blocks
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			kana++
		}
	}
	return han, kana
}

// The classes of runeClasses.
const (
	classHan  = 1
	classKana = 2
)

// runeClasses maps each rune below U+10000 to classHan, classKana (Han
// first, as countHan asks) or 0, from the unicode package's tables.
var runeClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	set := func(tab *unicode.RangeTable, k uint8) {
		for _, r := range tab.R16 {
			for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
				t[c] = k
			}
		}
		for _, r := range tab.R32 {
			for c := int(r.Lo); c <= int(r.Hi) && c < len(t); c += int(r.Stride) {
				t[c] = k
			}
		}
	}
	set(unicode.Hiragana, classKana)
	set(unicode.Katakana, classKana)
	set(unicode.Han, classHan)
	return &t
})

// resultText gives a tool result's canonical content: compact JSON when the
// text is one JSON value, else the text unchanged.
func resultText(s string) string {
	t := strings.TrimSpace(s)
	if t == "" {
		return s
	}
	switch c := t[0]; {
	case c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n':
		if v, err := jsontree.ParseString(t); err == nil {
			return jsontree.CompactString(&v)
		}
	}
	return s
}

// resultValue gives the canonical content of a result held as a JSON value:
// a string is taken as text (see resultText), anything else is compacted.
func resultValue(v *jsontree.Value) string {
	if v.Kind == jsontree.String {
		return resultText(v.Str)
	}
	return jsontree.CompactString(v)
}

// objectArguments turns a call's arguments value into a compact JSON
// object. A JSON string holding an object is decoded (stringArgs reports
// it); anything else that is not an object is an error.
func objectArguments(w *workspace, v *jsontree.Value) (args []byte, stringArgs bool, err error) {
	switch v.Kind {
	case jsontree.Object:
		return w.compact(v), false, nil
	case jsontree.String:
		inner, perr := jsontree.ParseString(v.Str)
		if perr != nil {
			return nil, true, fmt.Errorf("arguments string is not JSON: %w: %s", perr, excerpt(v.Str))
		}
		if inner.Kind != jsontree.Object {
			return nil, true, fmt.Errorf("arguments string holds a JSON %s, want an object", inner.Kind)
		}
		return w.compact(&inner), true, nil
	}
	return nil, false, fmt.Errorf("arguments are a JSON %s, want an object", v.Kind)
}

// excerpt quotes at most 60 runes of s for error details.
func excerpt(s string) string {
	const max = 60
	if utf8.RuneCountInString(s) <= max {
		return strconv.Quote(s)
	}
	n := 0
	for i := range s {
		if n == max {
			return strconv.Quote(s[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(s)
}

// jsonReject builds the reject for JSON text that did not decode: what was
// being read, the error with its byte offset, and the text around it.
func jsonReject(reason, what string, text []byte, err error) *contract.Reject {
	je, ok := err.(*jsontree.Error)
	if !ok {
		return reject(reason, "%s: %v", what, err)
	}
	lo := max(0, je.Off-30)
	hi := min(len(text), je.Off+30)
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	return reject(reason, "%s: %s at byte %d near %s", what, je.Msg, je.Off, strconv.Quote(string(text[lo:hi])))
}

func turnName(i int) string { return "turn " + strconv.Itoa(i) }

// requiredString returns the string member key of v, rejecting with
// reason one that is missing, null or not a string.
func requiredString(v *jsontree.Value, key, reason string) (string, error) {
	m := v.Get(key)
	switch {
	case m == nil:
		return "", reject(reason, "the row has no %q", key)
	case m.Kind != jsontree.String:
		return "", reject(reason, "%q is a JSON %s, want a string", key, m.Kind)
	}
	return m.Str, nil
}

// fieldString reads a string member of a row object; absent or null gives
// "". A member of another type is rejected with reason.
func fieldString(v *jsontree.Value, key, reason string) (string, error) {
	s, ok := v.StringOr(key)
	if !ok {
		return "", reject(reason, "%q is a JSON %s, want a string", key, v.Get(key).Kind)
	}
	return s, nil
}
