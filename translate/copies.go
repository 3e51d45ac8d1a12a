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
// Repair (see convertText) applies to text when the converter's mode says
// so, and always to locked values and their copies: nobody may change
// those, so a Simplified-only character s2twp leaves in them could not be
// asked away.
type converter struct {
	repair bool              // repair text (convert mode); teacher mode asks instead
	units  []string          // longest first
	locked map[string]bool   // the units
	done   map[string]string // conversions of units
	err    error             // the first damaged conversion; later calls return their input
}

func newConverter(repair bool) *converter {
	return &converter{repair: repair}
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
func (c *converter) text(s string) string { return c.convert(s, c.repair) }

// value converts an argument or result value: locked values with repair.
func (c *converter) value(s string, locked bool) string { return c.convert(s, c.repair || locked) }

func (c *converter) convert(s string, repair bool) string {
	if c.err != nil || !hasHan(s) {
		return s
	}
	var held []string // the units s holds
	for _, u := range c.units {
		if strings.Contains(s, u) {
			held = append(held, u)
		}
	}
	if len(held) == 0 {
		return c.piece(s, repair)
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
		b.WriteString(c.piece(s[prev:i], repair))
		b.WriteString(c.unit(u))
		i += len(u)
		prev = i
	}
	b.WriteString(c.piece(s[prev:], repair))
	return b.String()
}

// piece converts s as one text.
func (c *converter) piece(s string, repair bool) string {
	if c.err != nil || !hasHan(s) {
		return s
	}
	v, err := convertText(s, repair)
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
