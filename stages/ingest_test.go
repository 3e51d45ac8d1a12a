package stages

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/klauspost/compress/zstd"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// oaRow is one valid openai-format row whose user text is text.
func oaRow(text string) string {
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{
		{"role": "user", "content": text}, {"role": "assistant", "content": "ok " + text}}})
	return string(b)
}

// ingestRun is one run over a single dump; the log is kept.
type ingestRun struct {
	out  string
	err  error
	log  string
	m    *manifests.Stage
	rejs []shard.Reject
}

// runIngest writes dump as the only source (openai format, the given extra
// source settings) and runs ingest then an export.
func runIngest(t *testing.T, dir, dump, ext, extra string) ingestRun {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "dump."+ext), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf("seed: 1\noutput: {dir: out, shard_size: 4, jsonl: true}\nsources:\n  - {name: src, path: dump.%s, format: openai%s}\nstages:\n  - export: {}\n", ext, extra)
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, run := r.Run(context.Background())
	r.Close()
	res := ingestRun{out: filepath.Join(dir, "out"), err: run, log: log.String()}
	res.m = readManifest(t, res.out, "00-ingest")
	for _, sh := range res.m.Shards {
		if err := sh.Counts.Balanced(); err != nil {
			t.Errorf("shard %s: %v", sh.Name, err)
		}
		for _, o := range sh.Outputs {
			if strings.HasPrefix(filepath.Base(o.Path), "rejects-") {
				res.rejs = append(res.rejs, readRejects(t, filepath.Join(res.out, o.Path))...)
			}
		}
	}
	return res
}

func readRejects(t *testing.T, path string) []shard.Reject {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []shard.Reject
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var r shard.Reject
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestIngestDamage: damage in a dump costs the rows it touches, each kept
// as a reject with its line and raw bytes; what cannot be read is reported
// in the manifest and fails the run unless allow_partial is set.
func TestIngestDamage(t *testing.T) {
	rows := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, oaRow(fmt.Sprintf("row %d", i)))
		}
		return out
	}
	r6 := rows(6)
	deep := `{"messages":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
	indent := func(rs []string) string { // json.dump(indent=2)-like layout
		var parts []string
		for _, r := range rs {
			var v any
			json.Unmarshal([]byte(r), &v)
			b, _ := json.MarshalIndent(v, "  ", "  ")
			parts = append(parts, "  "+string(b))
		}
		return "[\n" + strings.Join(parts, ",\n") + "\n]\n"
	}
	brokenIndent := strings.Replace(indent(r6), `"content": "row 2"`, `"content": "row 2`, 1)
	tests := []struct {
		name, dump, ext, extra string
		in, out                int64
		rejected               map[string]int64
		rejectLine             string // in the detail of the first reject
		partial                bool
		wide                   bool // the dump is UTF-16: nothing is read, rows unknown
	}{
		{name: "jsonl: line cut short in the middle", ext: "jsonl",
			dump: strings.Join(r6[:2], "\n") + "\n" + r6[2][:20] + "\n" + strings.Join(r6[3:], "\n") + "\n",
			in:   6, out: 5, rejected: map[string]int64{"bad_json": 1}, rejectLine: "line 3,"},
		{name: "jsonl: 600-deep line in the middle", ext: "jsonl",
			dump: strings.Join(r6[:3], "\n") + "\n" + deep + "\n" + strings.Join(r6[3:], "\n") + "\n",
			in:   7, out: 6, rejected: map[string]int64{"bad_json": 1}, rejectLine: "line 4,"},
		{name: "jsonl: row over max_row_bytes", ext: "jsonl", extra: ", max_row_bytes: 300",
			dump: r6[0] + "\n" + oaRow(strings.Repeat("x", 1000)) + "\n" + r6[1] + "\n",
			in:   3, out: 2, rejected: map[string]int64{"row_too_large": 1}, rejectLine: "line 2,"},
		{name: "array, indent 2: broken element skipped", ext: "json", dump: brokenIndent,
			in: 6, out: 5, rejected: map[string]int64{"bad_framing": 1}},
		{name: "compact array cut in the middle: partial", ext: "json",
			dump: "[" + strings.Join(r6[:3], ",") + "," + r6[3][:25] + "," + strings.Join(r6[4:], ",") + "]",
			in:   3, out: 3, partial: true},
		{name: "truncated array: partial", ext: "json", dump: "[" + strings.Join(r6[:3], ",") + "," + r6[3][:25],
			in: 3, out: 3, partial: true},
		{name: "UTF-16 dump: partial from byte 0", ext: "json", dump: utf16LE("[" + strings.Join(r6, ",") + "]"),
			in: 0, out: 0, partial: true, wide: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runIngest(t, t.TempDir(), tt.dump, tt.ext, tt.extra)
			c := res.m.Totals
			if c.In != tt.in || c.Out != tt.out || fmt.Sprint(c.Rejected) != fmt.Sprint(tt.rejected) {
				t.Errorf("in %d out %d rejected %v; want in %d out %d rejected %v", c.In, c.Out, c.Rejected, tt.in, tt.out, tt.rejected)
			}
			if len(res.rejs) != int(manifests.Sum(tt.rejected)) {
				t.Fatalf("%d rejects kept, want %d", len(res.rejs), manifests.Sum(tt.rejected))
			}
			for _, rj := range res.rejs {
				if rj.Raw == "" || !strings.Contains(tt.dump, rj.Raw) {
					t.Errorf("reject %s: raw %.80q is not a piece of the dump", rj.ID, rj.Raw)
				}
			}
			if tt.rejectLine != "" && !strings.Contains(res.rejs[0].Detail, tt.rejectLine) {
				t.Errorf("reject detail %q does not name %q", res.rejs[0].Detail, tt.rejectLine)
			}
			u := res.m.Shards[0].Unread
			var pe *PartialError
			if !tt.partial {
				if res.err != nil || u != nil {
					t.Fatalf("run error %v, unread %+v", res.err, u)
				}
				return
			}
			if !errors.As(res.err, &pe) || u == nil {
				t.Fatalf("run error %v, unread %+v; want a PartialError and the unread part in the manifest", res.err, u)
			}
			if tt.wide {
				if u.Offset != 0 || u.Bytes != int64(len(tt.dump)) || u.Rows != 0 || !strings.Contains(res.err.Error(), "the dump is UTF-16") {
					t.Errorf("unread %+v, error %v: want the whole dump unread, rows unknown, and the error naming UTF-16", u, res.err)
				}
			} else if want := int64(len(tt.dump)) - u.Offset; u.Bytes != want || u.Bytes == 0 || u.Rows < 1 || u.Rows > 4 {
				t.Errorf("unread %+v: want %d bytes and 1–4 rows", u, want)
			}
			if !strings.Contains(res.log, "level=WARN") || !strings.Contains(res.log, "could not be read to its end") {
				t.Errorf("no WARN line for the unread part:\n%s", res.log)
			}
			if _, err := os.Stat(filepath.Join(res.out, "01-export")); !os.IsNotExist(err) {
				t.Errorf("a stage ran on a partial source: %v", err)
			}
			// The same run fails the same way, also when ingest is up to date.
			dir := filepath.Dir(res.out)
			if again := runIngest(t, dir, tt.dump, tt.ext, tt.extra); !errors.As(again.err, &pe) {
				t.Errorf("second run: %v, want the PartialError again", again.err)
			}
			// allow_partial lets the run go on; the manifest still says what was not read.
			ok := runIngest(t, dir, tt.dump, tt.ext, tt.extra+", allow_partial: true")
			if ok.err != nil || ok.m.Shards[0].Unread == nil || !strings.Contains(ok.log, "could not be read to its end") {
				t.Errorf("allow_partial: error %v, unread %+v", ok.err, ok.m.Shards[0].Unread)
			}
			if _, err := os.Stat(filepath.Join(ok.out, "01-export")); err != nil {
				t.Errorf("allow_partial: export did not run: %v", err)
			}
		})
	}
}

// TestIngestDamagedCompressed: a compressed dump cut short or corrupt keeps
// the rows decoded before the damage and is then handled as any dump that
// cannot be read to its end (PartialError, unread in the manifest,
// allow_partial), not as a failed read that a rerun could mend.
func TestIngestDamagedCompressed(t *testing.T) {
	var plain strings.Builder
	for i := range 40 {
		plain.WriteString(oaRow(fmt.Sprintf("row %d %s", i, strings.Repeat("x", i*7))) + "\n")
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(plain.String()))
	zw.Close()
	flipped := bytes.Clone(gz.Bytes())
	flipped[len(flipped)/2] ^= 0xff
	zs, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zst := zs.EncodeAll([]byte(plain.String()), nil)
	tests := []struct {
		name, dump, ext, reason string
		minRows                 int64 // rows kept before the damage, at least
	}{
		{"gzip cut short", gz.String()[:gz.Len()-40], "jsonl.gz", "the gzip stream ends early (the file is cut short)", 30},
		{"gzip corrupt", string(flipped), "jsonl.gz", "the gzip stream is corrupt", 0},
		{"zstd cut short", string(zst[:len(zst)-40]), "jsonl.zst", "the zstd stream ends early", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			res := runIngest(t, dir, tt.dump, tt.ext, "")
			var pe *PartialError
			u := res.m.Shards[0].Unread
			if !errors.As(res.err, &pe) || u == nil || !strings.Contains(u.Reason, tt.reason) {
				t.Fatalf("run error %v, unread %+v; want a PartialError and the unread part saying %q", res.err, u, tt.reason)
			}
			if c := res.m.Totals; c.In < tt.minRows || c.Out != c.In || c.In >= 40 {
				t.Errorf("in %d out %d: want the rows decoded before the damage (at least %d, fewer than 40)", c.In, c.Out, tt.minRows)
			}
			if again := runIngest(t, dir, tt.dump, tt.ext, ""); !errors.As(again.err, &pe) {
				t.Errorf("second run: %v, want the PartialError again", again.err)
			}
			ok := runIngest(t, dir, tt.dump, tt.ext, ", allow_partial: true")
			if ok.err != nil || ok.m.Shards[0].Unread == nil {
				t.Errorf("allow_partial: error %v, unread %+v", ok.err, ok.m.Shards[0].Unread)
			}
		})
	}
}

// TestIngestRepairsCountedAndEmptySourceWarns: a U+FFFD replacement is a
// counted repair; a source without rows is a WARN line.
func TestIngestRepairsCountedAndEmptySourceWarns(t *testing.T) {
	dump := oaRow("fine") + "\n" + strings.Replace(oaRow("caf\u00e9"), "\u00e9", "\xe9", 1) + "\n"
	res := runIngest(t, t.TempDir(), dump, "jsonl", "")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if got := res.m.Totals.Counters["repair.invalid_utf8"]; got != 1 || res.m.Totals.Out != 2 {
		t.Errorf("counters %v, out %d; want repair.invalid_utf8=1 and both rows", res.m.Totals.Counters, res.m.Totals.Out)
	}
	if strings.Contains(res.log, "0 rows") {
		t.Errorf("0 rows warned for a source with rows:\n%s", res.log)
	}
	empty := runIngest(t, t.TempDir(), "\n\n", "jsonl", "")
	if empty.err != nil || !bytes.Contains([]byte(empty.log), []byte(`level=WARN msg="source src: 0 rows"`)) {
		t.Errorf("empty source: error %v, log:\n%s", empty.err, empty.log)
	}
}

// A source whose dump changed is ingested again over its earlier shards'
// file names; at no instant may the ingest manifest on disk name those
// files with the earlier bytes (a kill would leave it so).
func TestIngestRedoNeverListsOldBytes(t *testing.T) {
	dir := t.TempDir()
	dump := func(prefix string) string {
		var b strings.Builder
		for i := range 400 {
			b.WriteString(oaRow(fmt.Sprintf("%s %d", prefix, i)) + "\n")
		}
		return b.String()
	}
	if first := runIngest(t, dir, dump("first"), "jsonl", ""); first.err != nil {
		t.Fatalf("first run: %v\n%s", first.err, first.log)
	}
	stop, watched := make(chan struct{}), make(chan []string)
	go func() {
		var bad []string
		for {
			select {
			case <-stop:
				watched <- bad
				return
			default:
			}
			if msg := staleListing(filepath.Join(dir, "out"), "00-ingest"); msg != "" && !slices.Contains(bad, msg) {
				bad = append(bad, msg)
			}
		}
	}()
	second := runIngest(t, dir, dump("second"), "jsonl", "")
	close(stop)
	if second.err != nil {
		t.Fatalf("second run: %v\n%s", second.err, second.log)
	}
	for _, msg := range <-watched {
		t.Error(msg)
	}
}

// TestIngestPartsMatchWholeShards: however a shard's rows are cut into
// parts for the workers (one part per shard, as before parts, one per row,
// a few rows each), ingest and the export after it write the same bytes:
// records, rejects, counts, repairs and the tool library, equal tools kept
// from the first row that has them.
func TestIngestPartsMatchWholeShards(t *testing.T) {
	demo, err := os.ReadFile("../testdata/demo/dumps/glaive.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(demo, &rows); err != nil {
		t.Fatal(err)
	}
	var many []json.RawMessage
	for range 20 {
		many = append(many, rows...)
	}
	glaive, _ := json.Marshal(many)
	var oa []string
	for i := range 40 {
		oa = append(oa, oaRow(fmt.Sprintf("row %d", i)))
	}
	oa[7] = oa[7][:15]           // bad_json
	oa[23] = "\xff" + oa[23][1:] // not UTF-8
	// An array cut short: rows up to the cut, the rest unread.
	var clean []string
	for i := range 31 {
		clean = append(clean, oaRow(fmt.Sprintf("clean %d", i)))
	}
	cut := "[" + strings.Join(clean[:30], ",") + "," + clean[30][:25]
	run := func(part int) string {
		t.Helper()
		old := partBytes
		partBytes = part
		defer func() { partBytes = old }()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "glaive.json"), glaive, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "oa.jsonl"), []byte(strings.Join(oa, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cut.json"), []byte(cut), 0o644); err != nil {
			t.Fatal(err)
		}
		y := `seed: 3
output: {dir: out, shard_size: 16, jsonl: true}
sources:
  - {name: glaive, path: glaive.json, format: glaive}
  - {name: oa, path: oa.jsonl, format: openai, fraction: 0.8}
  - {name: cut, path: cut.json, format: openai, allow_partial: true}
  - {name: few, path: oa.jsonl, format: openai, limit: 21}
stages:
  - export: {}
`
		path := filepath.Join(dir, "pipeline.yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		rep := runPipeline(t, path)
		if n, want := rep.Stages[0].Counts.In, int64(len(many)+len(oa)+30+21); n != want {
			t.Fatalf("ingest read %d rows, want %d", n, want)
		}
		if manifests.Sum(rep.Stages[0].Counts.Rejected) == 0 || manifests.Sum(rep.Stages[0].Counts.Filtered) == 0 {
			t.Fatalf("want rejects and filtered rows to compare, got %+v", rep.Stages[0].Counts)
		}
		return filepath.Join(dir, "out")
	}
	whole := run(1 << 40)
	for _, part := range []int{1, 700} {
		sameOutputs(t, whole, run(part), true)
	}
}

// TestIngestQuickFraming: a dump of one element per line is cut at the
// separator; where a row so cut is not the full scan's (a line holding an
// unclosed object, two objects, a string left open), the source is read
// again and the outputs are the full scan's, with no file of the first
// reading left.
func TestIngestQuickFraming(t *testing.T) {
	var rs []string
	for i := range 30 {
		rs = append(rs, oaRow(fmt.Sprintf("row %d", i)))
	}
	lines := func(damage map[int]string) string {
		out := slices.Clone(rs)
		for i, d := range damage {
			out[i] = d
		}
		return "[\n" + strings.Join(out, ",\n") + "\n]\n"
	}
	tests := []struct {
		name    string
		dump    string
		restart bool
		extra   string
	}{
		{"clean", lines(nil), false, ""},
		{"row Parse rejects, framed", lines(map[int]string{5: `{"messages":[]}`, 9: `{"messages":tru}`}), false, ""},
		{"line without its last brace", lines(map[int]string{2: rs[2][:len(rs[2])-1]}), false, ""},
		{"unclosed object ending in a brace", lines(map[int]string{21: rs[21][:len(rs[21])-2] + "}"}), true, ""},
		{"two objects on a line", lines(map[int]string{13: `{"a":1}, ` + rs[13]}), true, ""},
		{"string left open", lines(map[int]string{17: `{"messages":"x\"}`}), true, ""},
		{"then damage the full scan cannot skip", lines(map[int]string{4: `{"a":1}, ` + rs[4], 26: rs[26][:40] + "}"}), true, ""},
		// The full scan stops at row 2 (broken and over the limit): the
		// shards the first reading wrote after it must go.
		{"the full scan stops early", lines(map[int]string{2: rs[2][:len(rs[2])-2] + "}"}), true, ", max_row_bytes: 300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func(quick bool) ingestRun {
				old := quickFraming
				quickFraming = quick
				defer func() { quickFraming = old }()
				return runIngest(t, t.TempDir(), tt.dump, "json", ", allow_partial: true"+tt.extra)
			}
			full, quick := run(false), run(true)
			if fmt.Sprint(full.err) != fmt.Sprint(quick.err) {
				t.Fatalf("run errors differ: %v, %v", full.err, quick.err)
			}
			sameOutputs(t, full.out, quick.out, true)
			if again := strings.Contains(quick.log, "source read again"); again != tt.restart {
				t.Errorf("read again: %v, want %v", again, tt.restart)
			}
		})
	}
}

// TestRemoveOutputs: the files of the shards a void reading wrote are gone
// (shard and rejects), and the shard no longer counts as checked.
func TestRemoveOutputs(t *testing.T) {
	_, root := tempRoot(t)
	if err := root.MkdirAll("00-ingest"); err != nil {
		t.Fatal(err)
	}
	sr := stageRun{name: "ingest", out: root.Sub("00-ingest")}
	r := &Runner{p: &Pipeline{Output: Output{ShardSize: 10, RowGroupRows: 10}}}
	o := &shardOut{sh: manifests.Shard{Name: "src-00003"}}
	o.sh.In = 2
	o.keep(&record.Record{ID: "a", Messages: []record.Message{{Role: record.RoleUser, Content: "hi"}}})
	o.reject(shard.Reject{Stage: "ingest", ID: "src:1", Source: "src", Row: 1, Reason: "bad_json", Raw: "{"})
	sh, err := r.writeShard(context.Background(), sr, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.Outputs) != 2 || !r.checkedShard(sh.Outputs[0]) {
		t.Fatalf("outputs %+v", sh.Outputs)
	}
	if err := r.removeOutputs(sr, []manifests.Shard{sh}); err != nil {
		t.Fatal(err)
	}
	if left, err := sr.out.ReadDir("."); err != nil || len(left) != 0 {
		t.Fatalf("left %v (%v)", left, err)
	}
	if r.checkedShard(sh.Outputs[0]) {
		t.Error("a removed shard counts as checked")
	}
}

// utf16LE is s in UTF-16, little-endian, after a byte order mark.
func utf16LE(s string) string {
	b := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return string(b)
}
