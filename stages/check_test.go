package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
)

// A stage asks its records' requests in parallel, so the preview receives
// them in any order; check shows the same first request for the same
// pipeline each time (regression QA: 6 of 10 runs showed one noise request,
// 4 another).
func TestPreviewPrintsInSlotOrder(t *testing.T) {
	ask := func(slot, text string) llm.Request {
		return llm.Request{Stage: "noise@1", Template: "t1", Slot: slot,
			Messages: []llm.Message{{Role: "user", Content: text}},
			Offline:  func() (string, error) { return "ok " + text, nil }}
	}
	reqs := []llm.Request{ask("r1/call0", "first call"), ask("r1/call1", "second call"), ask("r2/call0", "third call")}
	print := func(order ...int) string {
		c := &previewClient{}
		for _, i := range order {
			if _, err := c.Complete(context.Background(), reqs[i]); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		c.print(&b, 2, 10)
		return b.String()
	}
	want := print(0, 1, 2)
	if !bytes.Contains([]byte(want), []byte("first call")) {
		t.Fatalf("preview does not show the first slot's request:\n%s", want)
	}
	for _, order := range [][]int{{2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
		if got := print(order...); got != want {
			t.Errorf("asked in order %v, the preview reads\n%s\nwant\n%s", order, got, want)
		}
	}
}

// TestCheckSourcesReadAgain: with ingest: {keep: false}, a run reads an
// up-to-date source again when a stage of the first group needs ingest's
// records of a shard of it (the first stage, or one after stages that keep
// no shards, has the shard to make) or an export of the group makes one of
// its shards. augment check names exactly the sources the run then reads
// again, and says the others would be skipped; of a stage that keeps no
// shards before one with shards to make, it says it makes its shards again
// in memory.
func TestCheckSourcesReadAgain(t *testing.T) {
	all := []string{"glaive", "toolace", "xlam"}
	for _, c := range []struct {
		name, stages string
		change       func(t *testing.T, path, out string)
		want         []string
	}{
		{"nothing changed", "  - verify: {checks: [roles]}\n  - decision_tokens: {}\n  - export: {}\n", nil, nil},
		{"the first stage changed", "  - verify: {checks: [roles]}\n  - decision_tokens: {}\n  - export: {}\n", moreChecks, all},
		{"a stage after one keeping no shards changed", "  - {decision_tokens: {}, keep: false}\n  - verify: {checks: [roles]}\n  - export: {}\n", moreChecks, all},
		{"a stage after one keeping no shards lost a shard", "  - {decision_tokens: {}, keep: false}\n  - verify: {checks: [roles]}\n  - export: {}\n", func(t *testing.T, _, out string) {
			if err := os.Remove(filepath.Join(out, "02-verify", "part-xlam-00001.parquet")); err != nil {
				t.Fatal(err)
			}
		}, []string{"xlam"}},
		// verify reads decision_tokens' shards; the export after it is in
		// the next group (dedup's).
		{"a stage after a kept one changed", "  - decision_tokens: {}\n  - verify: {checks: [roles]}\n  - dedup: {}\n  - export: {}\n", moreChecks, nil},
		// The export has shards to make (verify makes its input again):
		// the run reads the dumps for its token sample's estimate.
		{"a stage after a kept one changed, before an export", "  - decision_tokens: {}\n  - verify: {checks: [roles]}\n  - export: {}\n", moreChecks, all},
		{"the export changed", "  - decision_tokens: {}\n  - verify: {checks: [roles]}\n  - export: {}\n", func(t *testing.T, path, _ string) {
			editFile(t, path, "  - export: {}", "  - export: {style: inline, surface: llama3}")
		}, all},
		{"a first-stage shard lost", "  - decision_tokens: {}\n  - verify: {checks: [roles]}\n  - export: {}\n", func(t *testing.T, _, out string) {
			if err := os.Remove(filepath.Join(out, "01-decision_tokens", "part-glaive-00000.parquet")); err != nil {
				t.Fatal(err)
			}
		}, []string{"glaive"}},
		// xlam is read anew: the shards of the others stand.
		{"a dump changed", "  - decision_tokens: {}\n  - verify: {checks: [roles]}\n  - export: {}\n", shorterXLAM, nil},
		{"a dump changed and the first stage", "  - verify: {checks: [roles]}\n  - decision_tokens: {}\n  - export: {}\n", func(t *testing.T, path, out string) {
			shorterXLAM(t, path, out)
			moreChecks(t, path, out)
		}, []string{"glaive", "toolace"}},
		{"a stage after a Planner changed", "  - decision_tokens: {}\n  - dedup: {}\n  - verify: {checks: [roles]}\n  - export: {}\n", moreChecks, nil},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path, out := dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil, "xlam": nil}, c.stages+ingestNotKept)
			runPipeline(t, path)
			if c.change != nil {
				c.change(t, path, out)
			}
			p, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			b := checkSays(t, p)
			var checked []string
			for _, src := range all {
				line := regexp.MustCompile(`(?m)^  ` + src + ` .*$`).FindString(b)
				switch {
				case strings.Contains(line, "up to date") && strings.Contains(line, "would be read again: ingest keeps no shards, and a stage after it has shards of the source to make"):
					checked = append(checked, src)
				case !strings.Contains(line, "would be skipped") && !strings.Contains(line, "would ingest (dump or settings changed)"):
					t.Errorf("source %s: check says %q, want it read anew, skipped or read again", src, line)
				}
			}
			var log bytes.Buffer
			r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rep, err := r.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var ran []string
			for _, m := range regexp.MustCompile(`msg="read source again" stage=ingest source=(\S+)`).FindAllStringSubmatch(log.String(), -1) {
				ran = append(ran, m[1])
			}
			slices.Sort(ran)
			if fmt.Sprint(checked) != fmt.Sprint(c.want) || fmt.Sprint(ran) != fmt.Sprint(c.want) {
				t.Errorf("sources read again: check says %v, the run read %v, want %v; check:\n%s", checked, ran, c.want, b)
			}
			// decision_tokens, keeping no shards, makes again in memory
			// the shards verify makes.
			verified := 0
			for _, s := range rep.Stages {
				if s.Dir == "02-verify" {
					verified = s.Ran
				}
			}
			replayed := regexp.MustCompile(`01 decision_tokens \(decision_tokens\): up to date \((\d+) shards\), would be skipped; keeps no Parquet shards \(keep: false\); makes (\d+) of them again in memory for the stage after it, recording nothing`).FindStringSubmatch(b)
			dropped := strings.Contains(c.stages, "{decision_tokens: {}, keep: false}")
			switch {
			case dropped && c.want != nil && (replayed == nil || replayed[2] != strconv.Itoa(verified)):
				t.Errorf("decision_tokens, keeping no shards: check says %q, want it to make the %d shards verify made again in memory:\n%s", replayed, verified, b)
			case (!dropped || c.want == nil) && strings.Contains(b, "again in memory"):
				t.Errorf("check says a stage makes shards again in memory:\n%s", b)
			}
		})
	}
}

// moreChecks adds a check to the verify stage of the pipeline at path.
func moreChecks(t *testing.T, path, _ string) {
	t.Helper()
	editFile(t, path, "checks: [roles]", "checks: [roles, calls_resolved]")
}

// shorterXLAM drops the last record of the xlam dump beside the pipeline
// at path.
func shorterXLAM(t *testing.T, path, _ string) {
	t.Helper()
	editRows(t, path, "xlam", 2, func(rows []json.RawMessage) []json.RawMessage { return rows[:len(rows)-1] })
}

// editRows rewrites the JSON-array dump name.json beside the pipeline at
// path with what edit makes of its rows: it fails t when there are fewer than least.
func editRows(t *testing.T, path, name string, least int, edit func([]json.RawMessage) []json.RawMessage) {
	t.Helper()
	dump := filepath.Join(filepath.Dir(path), name+".json")
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) < least {
		t.Fatalf("%s: %d rows, want %d; %v", dump, len(rows), least, err)
	}
	if b, err = json.Marshal(edit(rows)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckRemovedSource: once a source is removed from pipeline.yaml, a
// run drops its shards from every later stage, even one with nothing else
// to make (goneShards). augment check says so of each stage, with the
// number of shards the run then drops, instead of "would be skipped".
func TestCheckRemovedSource(t *testing.T) {
	stages := []string{"01-decision_tokens", "02-export", "03-sample", "04-ex2"}
	bothIngests(t, func(t *testing.T, ingest string) {
		path, out := dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil, "xlam": nil}, removedSourceStages+ingest)
		runPipeline(t, path)
		before := map[string]int{}
		for _, sr := range stages {
			before[sr] = len(readManifest(t, out, sr).Shards)
		}
		editFile(t, path, "  - {name: xlam, path: xlam.json, format: xlam}\n", "")
		p, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		b := checkSays(t, p)
		runPipeline(t, path)
		for _, sr := range stages {
			dropped := before[sr] - len(readManifest(t, out, sr).Shards)
			line := regexp.MustCompile(`(?m)^  ` + sr[:2] + ` ` + sr[3:] + ` .*$`).FindString(b)
			if dropped == 0 {
				t.Fatalf("%s: the run dropped no shard of the removed source", sr)
			}
			if want := fmt.Sprintf("would drop %d shards whose input is gone", dropped); !strings.Contains(line, want) || strings.Contains(line, "would be skipped") {
				t.Errorf("check says %q; the run dropped %d shards (want %q)", line, dropped, want)
			}
		}
	})
}

// checkSays returns what augment check prints of p.
func checkSays(t testing.TB, p *Pipeline) string {
	t.Helper()
	var b strings.Builder
	if err := Check(context.Background(), p, Options{}, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCheckAfterSink: a sink passes its input through (pass.handed), so
// the stage after an export reads what the export read, unchanged when
// only the export has work (its settings changed, one of its files lost).
// augment check says of each stage exactly what the run then does: the
// export runs, the stages after it are skipped (regression QA: check said
// they "would run where its input changes").
func TestCheckAfterSink(t *testing.T) {
	const stages = "  - verify: {checks: [roles]}\n  - name: ex1\n    export: {template: qwen3}\n" +
		"  - decision_tokens: {}\n  - name: ex2\n    export: {style: inline, surface: decision}\n"
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path, out string)
	}{
		{"export settings changed", func(t *testing.T, path, _ string) {
			editFile(t, path, "template: qwen3}", "template: qwen3, thoughts: true}")
		}},
		{"export file lost", func(t *testing.T, _, out string) {
			files, err := filepath.Glob(filepath.Join(out, "02-ex1", "*", "part-*.jsonl"))
			if err != nil || len(files) < 2 {
				t.Fatalf("export files %v (%v), want 2 or more", files, err)
			}
			if err := os.Remove(files[0]); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			bothIngests(t, func(t *testing.T, ingest string) {
				path, out := dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil, "xlam": nil}, stages+ingest)
				runPipeline(t, path)
				c.change(t, path, out)
				p, err := Load(path)
				if err != nil {
					t.Fatal(err)
				}
				b := checkSays(t, p)
				rep := runPipeline(t, path)
				says := map[string]string{}
				for _, m := range regexp.MustCompile(`(?m)^  (\d\d) (\S+) \(\S+\): (.*)$`).FindAllStringSubmatch(b, -1) {
					says[m[1]+"-"+m[2]] = m[3]
				}
				for _, s := range rep.Stages {
					if s.Dir == "00-ingest" {
						continue
					}
					line, ok := says[s.Dir]
					switch {
					case !ok:
						t.Errorf("check has no line for %s:\n%s", s.Dir, b)
					case s.Dir == "02-ex1" && s.Ran == 0:
						t.Errorf("the run made no shard of ex1: the change gave it nothing to do")
					case s.Ran == 0 && !strings.HasPrefix(line, "up to date"):
						t.Errorf("%s: check says %q, the run skipped it", s.Dir, line)
					case s.Ran > 0 && strings.HasPrefix(line, "up to date"):
						t.Errorf("%s: check says %q, the run made %d shards", s.Dir, line, s.Ran)
					case strings.HasPrefix(line, "would run ") && strings.Contains(line, " of ") && !strings.HasPrefix(line, fmt.Sprintf("would run %d of ", s.Ran)):
						t.Errorf("%s: check says %q, the run made %d shards", s.Dir, line, s.Ran)
					}
				}
			})
		})
	}
}

// TestCheckSourceAfterStoppedReingest: a run that ingests a changed dump
// again first drops the dump's earlier shards from ingest's manifest
// (forgetShards); stopped before it records new ones, it leaves a manifest
// without them that names their files as superseded. augment check then
// says so of the source, not "no earlier run" (regression QA, after a
// kill -9 of a run whose ingest keeps no shards).
func TestCheckSourceAfterStoppedReingest(t *testing.T) {
	bothIngests(t, func(t *testing.T, ingest string) {
		path, out := dumpPipeline(t, map[string][]byte{"glaive": nil, "xlam": nil}, "  - decision_tokens: {}\n  - export: {}\n"+ingest)
		runPipeline(t, path)
		// Both dumps change; xlam, read second, has hundreds of shards
		// to write: the stop comes before their end.
		editRows(t, path, "glaive", 2, func(rows []json.RawMessage) []json.RawMessage { return rows[1:] })
		editRows(t, path, "xlam", 2, func(rows []json.RawMessage) []json.RawMessage {
			var more []json.RawMessage
			for range 300 {
				more = append(more, rows...)
			}
			return more
		})
		p, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		// Stopped once the first source is read: ingest's manifest
		// loses the shards of both sources, whose new ones it records
		// only at its end.
		stopRun(t, p, killAt{stage: "ingest", n: 1})
		r, err := NewRunner(p, Options{Version: "test"}) // for sourceShards
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		m := readManifest(t, out, "00-ingest")
		b := checkSays(t, p)
		dropped := 0
		for _, src := range []string{"glaive", "xlam"} {
			line := regexp.MustCompile(`(?m)^  ` + src + ` .*$`).FindString(b)
			if len(r.sourceShards(m, src)) > 0 {
				continue
			}
			dropped++
			if !strings.HasSuffix(line, "would ingest (a run stopped while ingesting it again, after dropping its earlier shards)") {
				t.Errorf("ingest's manifest has no shard of %s and supersedes %v; check says %q", src, m.Superseded, line)
			}
		}
		if dropped != 2 {
			t.Fatalf("the stopped run left ingest's manifest with the shards of %d of its 2 sources, want none:\n%s", 2-dropped, b)
		}
	})
}
