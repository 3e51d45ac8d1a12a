package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRecipeHeaderCommands runs the command the header of every example
// pipeline in testdata/recipes shows, exactly as written, from the root of
// a copy of the repository's testdata (so its outputs land in the copy, not
// in the repository), and checks that it succeeds and that every export it
// writes passes LLaMA-Factory's rules.
func TestRecipeHeaderCommands(t *testing.T) {
	recipes, err := filepath.Glob("../../testdata/recipes/*.yaml")
	if err != nil || len(recipes) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	for _, path := range recipes {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			args := headerCommand(t, path)
			root := t.TempDir()
			for _, d := range []string{"recipes", "demo"} {
				copyTree(t, filepath.Join("../../testdata", d), filepath.Join(root, "testdata", d))
			}
			e2eMustRun(t, root, args...)
			infos, _ := filepath.Glob(filepath.Join(root, "out", name, "*", "dataset_info.json"))
			if len(infos) == 0 {
				t.Fatalf("no export under out/%s", name)
			}
			for _, info := range infos {
				n, err := lfCheckDir(filepath.Dir(info))
				if err != nil || n == 0 {
					t.Errorf("%s: %d samples, %v", filepath.Dir(info), n, err)
				}
			}
			if name == "zh-tw" {
				// The demo dump mixes Simplified Chinese and English: the
				// English dialogue passes the converter unchanged.
				m := e2eManifest(t, filepath.Join(root, "out", name), "01-translate")
				if len(m.Totals.Rejected) > 0 || m.Totals.Out != m.Totals.In || m.Totals.In != 4 {
					t.Errorf("translate: %+v", m.Totals)
				}
			}
		})
	}
}

// headerCommand returns the arguments of the one "augment …" command in the
// leading comment block of a recipe (continued over lines ending in "\").
// The command must be plain words, so that it runs as written in any shell.
func headerCommand(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	cur, open := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			break
		}
		text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if !open && !strings.HasPrefix(text, "augment ") {
			continue
		}
		more := strings.HasSuffix(text, `\`)
		cur += " " + strings.TrimSuffix(text, `\`)
		if open = more; !open {
			cmds = append(cmds, cur)
			cur = ""
		}
	}
	if len(cmds) != 1 || open {
		t.Fatalf("%s: want one complete augment command in the header, found %d", path, len(cmds))
	}
	words := strings.Fields(cmds[0])
	for _, w := range words {
		if strings.ContainsAny(w, "'\"$`;|&<>()*?~") {
			t.Fatalf("%s: header command word %q needs a shell to read it; keep it to plain words", path, w)
		}
	}
	if words[0] != "augment" || !slices.Contains(words, "testdata/recipes/"+filepath.Base(path)) {
		t.Fatalf("%s: header command %q does not run this recipe from the repository root", path, cmds[0])
	}
	return words[1:]
}

// copyTree copies the regular files under src to dst, leaving out run
// outputs (out/ directories).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == "out" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
