package shard

import (
	"encoding/binary"

	"github.com/augmentdata/augment/internal/swar"
)

// ValidJSON reports whether data is one valid JSON value, giving exactly
// encoding/json.Valid's answer (the same grammar, whitespace, escapes,
// nesting limit and tolerance of bytes that are not UTF-8 inside strings;
// FuzzValidJSON holds it to that) in one tight pass without its scanner's
// per-byte calls. Check runs it on every JSON field of every record a stage
// writes, where json.Valid was a tenth of a cheap chain's CPU.
func ValidJSON(data []byte) bool {
	var stackBuf [32]byte
	stack := stackBuf[:0] // '{' or '[' per open container
	n := len(data)
	i := 0
value:
	i = skipSpace(data, i)
	if i >= n {
		return false
	}
	switch c := data[i]; c {
	case '{', '[':
		if len(stack) >= maxNestingDepth {
			return false
		}
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		i = skipSpace(data, i+1)
		if i < n && data[i] == close {
			i++
			goto after
		}
		stack = append(stack, c)
		if c == '[' {
			goto value
		}
		goto key
	case '"':
		if i = skipString(data, i+1); i < 0 {
			return false
		}
	case 't':
		if i = skipWord(data, i, "true"); i < 0 {
			return false
		}
	case 'f':
		if i = skipWord(data, i, "false"); i < 0 {
			return false
		}
	case 'n':
		if i = skipWord(data, i, "null"); i < 0 {
			return false
		}
	default:
		if i = skipNumber(data, i); i < 0 {
			return false
		}
	}
after: // a value ended at i
	i = skipSpace(data, i)
	if len(stack) == 0 {
		return i == n
	}
	if i >= n {
		return false
	}
	switch top := stack[len(stack)-1]; data[i] {
	case ',':
		i++
		if top == '[' {
			goto value
		}
		goto key
	case '}':
		if top != '{' {
			return false
		}
	case ']':
		if top != '[' {
			return false
		}
	default:
		return false
	}
	stack = stack[:len(stack)-1]
	i++
	goto after
key: // an object member's key is expected at i
	i = skipSpace(data, i)
	if i >= n || data[i] != '"' {
		return false
	}
	if i = skipString(data, i+1); i < 0 {
		return false
	}
	i = skipSpace(data, i)
	if i >= n || data[i] != ':' {
		return false
	}
	i++
	goto value
}

// maxNestingDepth is encoding/json's limit on nested arrays and objects.
const maxNestingDepth = 10000

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string whose opening quote is
// before i, or -1: a control character, a bad escape or no closing quote.
func skipString(data []byte, i int) int {
	for i < len(data) {
		// Eight plain bytes at a time, then one by one from the first
		// word holding a quote, a backslash or a control character.
		for i+8 <= len(data) && swar.StringSpecial(binary.LittleEndian.Uint64(data[i:])) == 0 {
			i += 8
		}
		for i < len(data) && plainByte[data[i]] {
			i++
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default:
			i++
		}
	}
	return -1
}

// plainByte marks the bytes a string holds as they are: not '"', not '\\'
// and not a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func skipWord(data []byte, i int, word string) int {
	if len(data)-i < len(word) || string(data[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// skipNumber returns the index after the number starting at i, or -1.
func skipNumber(data []byte, i int) int {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return -1
	}
	if i < n && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}
