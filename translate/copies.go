package translate

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A converter converts the strings of one record with s2twp (convertText)
// so that copies of locked values stay copies: a locked argument value
// (see classify: a URL, an e-mail address, a date with a declared format…)
// converts the same wherever the record's text, reasoning or results quote
// it. Each locked argument value that holds Han characters and is at least
// two characters long is a unit; a string holding units is cut at them,
// leftmost and longest first, each unit is converted on its own, as the
// argument itself is, and the text between the units as usual. Free-text
// values are not units: they are language, converted in context like the
// rest of the text (OpenCC's phrase segmentation depends on the
// neighbours, so cutting text at them would change its conversion).
//
// What a string becomes depends on the mode. Convert mode (the source is
// Simplified Chinese, see convertible) converts every string with s2twp and
// repairs what phrase matching leaves (see convertText). Teacher mode
// converts no teacher text with s2twp: the teacher was asked for Taiwan
// Traditional text, and s2twp, made for Simplified input, damages correct
// Traditional text (演算法→演演算法, 文件→檔案). It only replaces each
// Simplified-only character of the answer by its own conversion (see
// repairText), so the Taiwan words the teacher chose stay. Locked values
// and their copies, which nobody may change, go through s2twp with repair
// when they hold a Simplified-only character and keep their bytes when
// they do not.
type converter struct {
	convertMode bool              // convert mode; otherwise teacher mode
	units       []string          // longest first
	locked      map[string]bool   // the units
	done        map[string]string // conversions of units
	err         error             // the first damaged conversion; later calls return their input
}

func newConverter(convertMode bool) *converter {
	return &converter{convertMode: convertMode}
}

// addUnit makes the locked argument value v a unit. Call it for every
// locked argument value before converting anything.
func (c *converter) addUnit(v string) {
	if !hasHan(v) || utf8.RuneCountInString(v) < 2 || c.locked[v] {
		return
	}
	if c.locked == nil {
		c.locked = make(map[string]bool)
	}
	c.units = append(c.units, v)
	c.locked[v] = true
}

// prepare orders the units; call it after the last addUnit.
func (c *converter) prepare() {
	slices.SortFunc(c.units, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
}

// text converts a text or a free-text value.
func (c *converter) text(s string) string { return c.convert(s, false) }

// value converts an argument or result value, locked or free text.
func (c *converter) value(s string, locked bool) string { return c.convert(s, locked) }

func (c *converter) convert(s string, locked bool) string {
	if c.err != nil || !hasHan(s) || c.convertMode && !chineseText(s) {
		return s
	}
	var held []string // the units s holds
	for _, u := range c.units {
		if strings.Contains(s, u) {
			held = append(held, u)
		}
	}
	if len(held) == 0 {
		return c.piece(s, locked)
	}
	if held[0] == s { // a whole value
		return c.unit(s)
	}
	var b strings.Builder
	prev := 0
	for i := 0; i < len(s); {
		k := slices.IndexFunc(held, func(u string) bool { return strings.HasPrefix(s[i:], u) })
		if k < 0 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		u := held[k]
		b.WriteString(c.piece(s[prev:i], locked))
		b.WriteString(c.unit(u))
		i += len(u)
		prev = i
	}
	b.WriteString(c.piece(s[prev:], locked))
	return b.String()
}

// piece converts s as one text; locked says s is (part of) a locked value.
func (c *converter) piece(s string, locked bool) string {
	if c.err != nil || !hasHan(s) {
		return s
	}
	if !c.convertMode {
		if !locked {
			return mustChinese().repairText(s)
		}
		if _, ok := HasSimplifiedOnly(s); !ok {
			return s
		}
	}
	v, err := convertText(s)
	if err != nil {
		c.err = err
		return s
	}
	return v
}

// unit converts the unit u on its own, once.
func (c *converter) unit(u string) string {
	if v, ok := c.done[u]; ok {
		return v
	}
	v := c.piece(u, true)
	if c.err == nil {
		if c.done == nil {
			c.done = make(map[string]string)
		}
		c.done[u] = v
	}
	return v
}
