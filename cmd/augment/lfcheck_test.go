package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// lfcheck is a testscript command: `lfcheck DIR [min]` loads DIR the way
// LLaMA-Factory loads a dataset_dir (dataset_info.json, then every file of
// each dataset's folder) and applies its sharegpt rules to every sample. It
// fails on the first sample LLaMA-Factory would drop or crash on, and when
// fewer than min samples (default 1) were found.
//
// It is written from LLaMA-Factory's SharegptDatasetConverter and
// FunctionFormatter rules, independently of verify.CheckShareGPT (which the
// exporter uses), so that the two can disagree.
func lfcheck(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: lfcheck DIR [min]")
	}
	dir := ts.MkAbs(args[0])
	min := 1
	if len(args) > 1 {
		fmt.Sscan(args[1], &min)
	}
	n, err := lfCheckDir(dir)
	if err == nil && n < min {
		err = fmt.Errorf("%d samples, want at least %d", n, min)
	}
	if neg {
		if err == nil {
			ts.Fatalf("lfcheck: %d samples all valid, want a failure", n)
		}
		return
	}
	if err != nil {
		ts.Fatalf("lfcheck: %v", err)
	}
	ts.Logf("lfcheck: %d samples pass LLaMA-Factory's rules", n)
}

func lfCheckDir(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "dataset_info.json"))
	if err != nil {
		return 0, err
	}
	var info map[string]struct {
		FileName   string            `json:"file_name"`
		Formatting string            `json:"formatting"`
		Columns    map[string]string `json:"columns"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return 0, fmt.Errorf("dataset_info.json: %w", err)
	}
	total := 0
	for name, d := range info {
		if d.Formatting != "sharegpt" {
			return total, fmt.Errorf("%s: formatting %q", name, d.Formatting)
		}
		msgCol, toolsCol := d.Columns["messages"], d.Columns["tools"]
		if msgCol == "" {
			msgCol = "conversations"
		}
		files, err := filepath.Glob(filepath.Join(dir, d.FileName, "*"))
		if err != nil || len(files) == 0 {
			return total, fmt.Errorf("%s: no files in %s", name, d.FileName)
		}
		ext := filepath.Ext(files[0])
		for _, f := range files {
			if filepath.Ext(f) != ext {
				return total, fmt.Errorf("%s: mixed file types %s and %s (LLaMA-Factory loads one type per folder)", name, ext, filepath.Ext(f))
			}
			if ext != ".jsonl" {
				return total, fmt.Errorf("%s: lfcheck reads jsonl only, got %s", f, ext)
			}
			n, err := lfCheckFile(f, msgCol, toolsCol)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func lfCheckFile(path, msgCol, toolsCol string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		var row map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return n, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if err := lfCheckSample(row, msgCol, toolsCol); err != nil {
			return n, fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	return n, sc.Err()
}

// lfCheckSample applies the converter's rules: optional leading system
// message; then human|observation at even and gpt|function_call at odd
// positions; an even, non-zero count; function_call values JSON objects (or
// lists of them) with name and an object arguments; tools a JSON list.
func lfCheckSample(row map[string]json.RawMessage, msgCol, toolsCol string) error {
	var msgs []map[string]any
	if err := json.Unmarshal(row[msgCol], &msgs); err != nil {
		return fmt.Errorf("%s: %v", msgCol, err)
	}
	if len(msgs) > 0 && msgs[0]["from"] == "system" {
		msgs = msgs[1:]
	}
	if len(msgs) == 0 || len(msgs)%2 != 0 {
		return fmt.Errorf("invalid message count %d", len(msgs))
	}
	for i, m := range msgs {
		from, ok1 := m["from"].(string)
		value, ok2 := m["value"].(string)
		if !ok1 || !ok2 {
			return fmt.Errorf("message %d lacks from/value (KeyError in LLaMA-Factory)", i)
		}
		even := from == "human" || from == "observation"
		odd := from == "gpt" || from == "function_call"
		if (i%2 == 0 && !even) || (i%2 == 1 && !odd) {
			return fmt.Errorf("invalid role tag %q at position %d", from, i)
		}
		if from == "function_call" {
			if err := lfCheckCall(value); err != nil {
				return fmt.Errorf("message %d: %v", i, err)
			}
		}
	}
	if toolsCol != "" {
		var s string
		if raw, ok := row[toolsCol]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			var tools []map[string]any
			if err := json.Unmarshal([]byte(s), &tools); err != nil {
				return fmt.Errorf("tools is not a JSON list: %v", err)
			}
		}
	}
	return nil
}

func lfCheckCall(value string) error {
	// Templates with thought words keep a leading <think>…</think>.
	if rest, ok := strings.CutPrefix(value, "<think>"); ok {
		if _, after, ok := strings.Cut(rest, "</think>"); ok {
			value = after
		}
	}
	var v any
	if err := json.Unmarshal([]byte(strings.TrimSpace(value)), &v); err != nil {
		return fmt.Errorf("invalid JSON format in function message: %v", err)
	}
	calls, ok := v.([]any)
	if !ok {
		calls = []any{v}
	}
	if len(calls) == 0 {
		return fmt.Errorf("empty call list")
	}
	for _, c := range calls {
		m, ok := c.(map[string]any)
		if !ok {
			return fmt.Errorf("call is not an object")
		}
		if _, ok := m["name"].(string); !ok {
			return fmt.Errorf("call without a name")
		}
		if _, ok := m["arguments"].(map[string]any); !ok {
			return fmt.Errorf("call %v: arguments is not an object", m["name"])
		}
	}
	return nil
}
