package report

import (
	"fmt"
	"github.com/augmentdata/augment/clip"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// A bar is one bar of a chart. Parts split it into stacked segments (class
// names "bar", "bar2", "bar3" …); a bar without parts is one segment of
// Value.
type bar struct {
	Label string
	Value float64
	Parts []float64
	Title string // tooltip; default label: value
}

// Charts are inline SVG built here, so the page needs no script and no
// network. Every chart is an <svg class="chart" data-chart=NAME> whose
// bars are <rect class="bar…" data-value=N>: the browser test counts them.

const (
	chartWidth = 520
	rowHeight  = 20
	labelWidth = 160
)

// hbars draws a horizontal bar chart, one row per bar, value printed at the
// end of each bar.
func hbars(name string, bars []bar, unit string) template.HTML {
	if len(bars) == 0 {
		return template.HTML(`<p class="empty" data-empty="` + html.EscapeString(name) + `">nothing recorded</p>`)
	}
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, b.Value)
	}
	h := len(bars)*rowHeight + 10
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" data-chart="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		html.EscapeString(name), chartWidth, h, chartWidth, h)
	span := float64(chartWidth - labelWidth - 70)
	for i, b := range bars {
		y := 5 + i*rowHeight
		title := b.Title
		if title == "" {
			title = fmt.Sprintf("%s: %s%s", b.Label, num(b.Value), unit)
		}
		fmt.Fprintf(&s, `<g data-label="%s"><title>%s</title><text class="label" x="%d" y="%d" text-anchor="end">%s</text>`,
			html.EscapeString(b.Label), html.EscapeString(title), labelWidth-6, y+14, html.EscapeString(clip.Runes(b.Label, 24)))
		parts := b.Parts
		if len(parts) == 0 {
			parts = []float64{b.Value}
		}
		x := float64(labelWidth)
		for j, p := range parts {
			w := 0.0
			if maxV > 0 {
				w = span * p / maxV
			}
			if p > 0 {
				w = math.Max(w, 1)
			}
			class := "bar"
			if j > 0 {
				class += strconv.Itoa(j + 1)
			}
			fmt.Fprintf(&s, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d" data-value="%s"></rect>`,
				class, x, y+2, w, rowHeight-4, num(p))
			x += w
		}
		fmt.Fprintf(&s, `<text class="value" x="%.1f" y="%d">%s%s</text></g>`, x+4, y+14, num(b.Value), html.EscapeString(unit))
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// vbars draws a histogram: one vertical bar per bin, labels under them.
func vbars(name string, bars []bar) template.HTML {
	if len(bars) == 0 {
		return template.HTML(`<p class="empty" data-empty="` + html.EscapeString(name) + `">nothing recorded</p>`)
	}
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, b.Value)
	}
	const h, base, top = 180, 150, 16
	bw := math.Min(48, float64(chartWidth-40)/float64(len(bars)))
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" data-chart="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		html.EscapeString(name), chartWidth, h, chartWidth, h)
	fmt.Fprintf(&s, `<line class="axis" x1="20" y1="%d" x2="%d" y2="%d"></line>`, base, chartWidth-10, base)
	every := max(1, len(bars)/12) // label at most about 12 bins
	for i, b := range bars {
		x := 24 + float64(i)*bw
		bh := 0.0
		if maxV > 0 {
			bh = float64(base-top) * b.Value / maxV
		}
		if b.Value > 0 {
			bh = math.Max(bh, 1)
		}
		title := b.Title
		if title == "" {
			title = fmt.Sprintf("%s: %s", b.Label, num(b.Value))
		}
		fmt.Fprintf(&s, `<g data-label="%s"><title>%s</title><rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" data-value="%s"></rect>`,
			html.EscapeString(b.Label), html.EscapeString(title), x+1, float64(base)-bh, math.Max(bw-2, 1), bh, num(b.Value))
		if b.Value > 0 && bw >= 18 {
			fmt.Fprintf(&s, `<text class="value" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x+bw/2, float64(base)-bh-3, num(b.Value))
		}
		if i%every == 0 {
			fmt.Fprintf(&s, `<text class="label" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+bw/2, base+14, html.EscapeString(clip.Runes(b.Label, 10)))
		}
		s.WriteString(`</g>`)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// A point of a line chart.
type point struct {
	X, Y  float64
	Label string
}

// line draws points joined by a step line (cumulative values), a dot per
// point (class "bar", so the browser test counts them like bars).
func line(name string, pts []point, xUnit, yUnit string) template.HTML {
	if len(pts) == 0 {
		return template.HTML(`<p class="empty" data-empty="` + html.EscapeString(name) + `">nothing recorded</p>`)
	}
	const h, left, base, top = 200, 60, 170, 16
	minX, maxX, maxY := pts[0].X, pts[0].X, 0.0
	for _, p := range pts {
		minX, maxX, maxY = math.Min(minX, p.X), math.Max(maxX, p.X), math.Max(maxY, p.Y)
	}
	sx := func(x float64) float64 {
		if maxX == minX {
			return left
		}
		return left + (chartWidth-left-30)*(x-minX)/(maxX-minX)
	}
	sy := func(y float64) float64 {
		if maxY == 0 {
			return base
		}
		return base - (base-top)*y/maxY
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" data-chart="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		html.EscapeString(name), chartWidth, h, chartWidth, h)
	fmt.Fprintf(&s, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, left, base, chartWidth-20, base)
	fmt.Fprintf(&s, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"></line>`, left, top, left, base)
	fmt.Fprintf(&s, `<text class="label" x="%d" y="%d" text-anchor="end">%s%s</text>`, left-4, top+4, num(maxY), html.EscapeString(yUnit))
	fmt.Fprintf(&s, `<text class="label" x="%d" y="%d" text-anchor="end">0</text>`, left-4, base)
	fmt.Fprintf(&s, `<text class="label" x="%d" y="%d" text-anchor="end">%s%s</text>`, chartWidth-20, base+16, num(maxX-minX), html.EscapeString(xUnit))
	var path strings.Builder
	for i, p := range pts {
		if i == 0 {
			fmt.Fprintf(&path, "M%.1f %.1f", sx(p.X), sy(p.Y))
		} else {
			fmt.Fprintf(&path, " H%.1f V%.1f", sx(p.X), sy(p.Y))
		}
	}
	fmt.Fprintf(&s, `<path class="line" d="%s"></path>`, path.String())
	for _, p := range pts {
		fmt.Fprintf(&s, `<g><title>%s</title><circle class="bar" cx="%.1f" cy="%.1f" r="4" data-value="%s"></circle></g>`,
			html.EscapeString(p.Label), sx(p.X), sy(p.Y), num(p.Y))
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// num prints integers without decimals and other values with up to four.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 4, 64), "0"), ".")
}

// countBars turns counts into bars, largest first.
func countBars(c Counts) []bar {
	var out []bar
	for _, k := range c.Keys() {
		out = append(out, bar{Label: k, Value: float64(c[k])})
	}
	return out
}

// intBars turns an integer histogram into one bar per value from the
// smallest to the largest (gaps as empty bars), or into bins of equal width
// when the range is wide.
func intBars(h IntHist) []bar {
	vs := h.Values()
	if len(vs) == 0 {
		return nil
	}
	lo, hi := vs[0], vs[len(vs)-1]
	if hi-lo < 40 {
		var out []bar
		for v := lo; v <= hi; v++ {
			out = append(out, bar{Label: strconv.Itoa(v), Value: float64(h[v])})
		}
		return out
	}
	return binned(lo, hi, func(yield func(int, int64) bool) {
		for _, v := range vs {
			if !yield(v, h[v]) {
				return
			}
		}
	})
}

// tokenBars bins the counted values of h into about 24 bins.
func tokenBars(h IntHist) []bar {
	if len(h) == 0 {
		return nil
	}
	return intBars(h)
}

func binned(lo, hi int, each func(func(int, int64) bool)) []bar {
	const bins = 24
	width := (hi - lo + bins) / bins
	out := make([]bar, bins)
	for i := range out {
		a := lo + i*width
		out[i].Label = strconv.Itoa(a)
		out[i].Title = fmt.Sprintf("%d–%d", a, a+width-1)
	}
	for v, n := range each {
		out[(v-lo)/width].Value += float64(n)
	}
	for i := range out {
		out[i].Title += ": " + num(out[i].Value)
	}
	for len(out) > 0 && out[len(out)-1].Value == 0 {
		out = out[:len(out)-1]
	}
	return out
}
