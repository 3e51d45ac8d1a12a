package stages

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
)

// Benchmark file formats the decontaminate stage reads.
const (
	BenchBFCL     = "bfcl"     // JSON lines {id, question, function}; question is turns, or a list of turn lists
	BenchShareGPT = "sharegpt" // as the sharegpt reader: LLaMA-Factory sharegpt or its messages format
	BenchOpenAI   = "openai"   // as the openai reader: {messages, tools}
	BenchText     = "text"     // one item per non-blank line
)

var benchFormats = []string{BenchBFCL, BenchShareGPT, BenchOpenAI, BenchText}

// A benchItem is one evaluation item: its user text and, when the format
// has them, the calls that answer it.
type benchItem struct {
	ID    string
	User  []string        // the user turns
	Calls [][]record.Call // the calls of each assistant turn with calls
}

// readBenchmark reads every item of a benchmark file. A file that cannot be
// read whole is an error naming the line (1-based) or item: a partly read
// benchmark would let leaks through unnoticed. loose names the chat items
// indexed by their user turns alone (readChats).
func readBenchmark(r io.Reader, name, format string) (items []benchItem, loose []string, err error) {
	switch format {
	case BenchBFCL:
		items, err = readBFCL(r, name)
	case BenchText:
		items, err = readTextLines(r, name)
	case BenchShareGPT, BenchOpenAI:
		return readChats(r, name, format)
	default:
		err = fmt.Errorf("format %q is not one of %s", format, strings.Join(benchFormats, ", "))
	}
	return items, nil, err
}

// readBFCL reads BFCL's question files: one JSON object per line with "id"
// and "question", where question is a list of {role, content} turns, a list
// of such lists (one per user turn of a multi-turn entry), or a string.
// Only user turns count; "function" is not needed.
func readBFCL(r io.Reader, name string) ([]benchItem, error) {
	var items []benchItem
	err := eachLine(r, func(n int, line []byte) error {
		var row struct {
			ID       json.RawMessage `json:"id"`
			Question json.RawMessage `json:"question"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return err
		}
		if len(row.Question) == 0 {
			return errors.New(`no "question"`)
		}
		id := name + ":" + strconv.Itoa(n)
		var s string
		if json.Unmarshal(row.ID, &s) == nil && s != "" {
			id = s
		} else if len(row.ID) > 0 && string(row.ID) != "null" {
			id = string(row.ID)
		}
		user, err := bfclUser(row.Question, 0)
		if err != nil {
			return fmt.Errorf("question: %w", err)
		}
		items = append(items, benchItem{ID: id, User: user})
		return nil
	})
	return items, err
}

// bfclUser collects the user turns of a BFCL question value.
func bfclUser(v json.RawMessage, depth int) ([]string, error) {
	if depth > 2 {
		return nil, errors.New("nested deeper than a list of turn lists")
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, errors.New("empty")
	}
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	case '{':
		var t struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, err
		}
		if t.Role == "user" {
			return []string{t.Content}, nil
		}
		return nil, nil
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, err
		}
		var out []string
		for _, e := range list {
			u, err := bfclUser(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, u...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string, a turn or a list, got %.20s", v)
}

// readTextLines makes one item of each non-blank line.
func readTextLines(r io.Reader, name string) ([]benchItem, error) {
	var items []benchItem
	err := eachLine(r, func(n int, line []byte) error {
		items = append(items, benchItem{ID: name + ":" + strconv.Itoa(n), User: []string{string(line)}})
		return nil
	})
	return items, err
}

// eachLine calls fn with every non-blank line (trimmed) and its 1-based
// number; lines may be long. A UTF-8 byte order mark starting the file is
// skipped, as the dump readers skip it. An error names the line.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return err
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if ferr := fn(n, t); ferr != nil {
				return fmt.Errorf("line %d: %w", n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readChats reads a dump in one of augment's chat formats with its own
// readers; each record is an item with its user turns and calls. An item
// the reader rejects (a call to an unlisted tool, an observation after no
// call: evaluation files are not clean) still has user turns to compare:
// it is indexed by them alone (chatUserTurns) and named in loose. Items
// without even those are errors, all listed at once.
func readChats(r io.Reader, name, format string) (items []benchItem, loose []string, err error) {
	sc := formats.NewScanner(r)
	var bad []string
	for {
		row, i, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		rec, err := formats.Parse(format, name, i, row)
		if err != nil {
			if user := chatUserTurns(row); len(user) > 0 {
				items = append(items, benchItem{ID: fmt.Sprintf("%s:%d", name, i), User: user})
				loose = append(loose, fmt.Sprintf("item %d (%v)", i, err))
				continue
			}
			bad = append(bad, fmt.Sprintf("item %d: %v", i, err))
			continue
		}
		it := benchItem{ID: rec.ID, Calls: turnCalls(rec.Messages)}
		for _, m := range rec.Messages {
			if m.Role == record.RoleUser {
				it.User = append(it.User, m.Content)
			}
		}
		items = append(items, it)
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("%d unreadable item(s), with no user turn to compare: %s", len(bad), clip.List(bad, 10))
	}
	return items, loose, nil
}

// chatUserTurns reads the user turns of a sharegpt or openai row as plain
// JSON, without the reader's checks: the "human"/"user" entries of its
// "conversations" or "messages" whose text is a string.
func chatUserTurns(row []byte) []string {
	type turn struct {
		From    string          `json:"from"`
		Role    string          `json:"role"`
		Value   json.RawMessage `json:"value"`
		Content json.RawMessage `json:"content"`
	}
	var v struct {
		Conversations []turn `json:"conversations"`
		Messages      []turn `json:"messages"`
	}
	if json.Unmarshal(row, &v) != nil {
		return nil
	}
	var out []string
	for _, t := range append(v.Conversations, v.Messages...) {
		if t.From != "human" && t.From != "user" && t.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(t.Value, &s) == nil || json.Unmarshal(t.Content, &s) == nil {
			if strings.TrimSpace(s) != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
