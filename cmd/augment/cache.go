package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages"
	"github.com/augmentdata/augment/stages/llm"
)

// cmdCache inspects a run's request cache (read-only; safe while no run
// holds it): its main file and every worker's segment (cache/segments/*).
func cmdCache(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"cache: want a subcommand: stats, ls, get or verify"}
	}
	sub, args := args[0], args[1:]
	if isHelp(sub) {
		fmt.Fprintln(stderr, "Usage: augment cache stats|ls [STAGE@VERSION]|get KEY|verify [-dir out]\n\nRun \"augment cache <subcommand> -h\" for its flags.")
		return flag.ErrHelp
	}
	fs := newFlags("cache "+sub, stderr, "[-dir out] "+map[string]string{"get": "KEY", "ls": "[STAGE@VERSION]"}[sub])
	dir := fs.String("dir", "out", "the run's output directory (pipeline.yaml's output.dir)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if !slices.Contains([]string{"stats", "ls", "get", "verify"}, sub) {
		return usageError{fmt.Sprintf("cache: unknown subcommand %q (want stats, ls, get or verify)", sub)}
	}
	maxArgs := 0 // ls takes a stage, get a key
	if sub == "ls" || sub == "get" {
		maxArgs = 1
	}
	switch {
	case sub == "get" && len(pos) != 1:
		return usageError{"cache get: want one key (at least 8 hex digits)"}
	case len(pos) > maxArgs:
		return usageError{fmt.Sprintf("cache %s: unexpected argument %q", sub, pos[maxArgs])}
	}
	if err := workDir(*dir, "cache"); err != nil {
		return err
	}
	segs, err := llm.CacheSegments(filepath.Join(*dir, "cache"))
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		if !stages.HoldsRun(*dir) {
			return fmt.Errorf("%s %w: no request cache and no augment output", *dir, manifests.ErrNoRun)
		}
		return fmt.Errorf("no request cache in %s (the run asked no teacher, or its cache was removed)", filepath.Join(*dir, "cache"))
	}
	caches := make([]*llm.Cache, len(segs))
	defer func() {
		for _, c := range caches {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, s := range segs {
		if caches[i], err = llm.OpenCacheReadOnly(s.Dir); err != nil {
			return fmt.Errorf("cache %s: %w", s.Name, err)
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	switch sub {
	case "stats":
		return cacheStats(stdout, segs, caches)
	case "ls":
		stage := ""
		if len(pos) > 0 {
			stage = pos[0]
		}
		// An answer in several files (a rerun with another worker count
		// found it in one and never wrote it again, but a killed worker's
		// redo may have) is listed once, from the first file.
		seen := map[string]bool{}
		for _, c := range caches {
			err := c.List(stage, func(e llm.CacheEntry) error {
				if seen[e.Key] {
					return nil
				}
				seen[e.Key] = true
				fmt.Fprintf(stdout, "%s %s %s\n", e.Key, e.Stage, clipLine(e.Response.Content, 80))
				return nil
			})
			if err != nil {
				return err
			}
		}
		if len(seen) == 0 && stage != "" {
			// Say what is there rather than nothing at all.
			var names []string
			for _, c := range caches {
				st, err := c.Stats()
				if err != nil {
					return err
				}
				for _, n := range st.Chat {
					if !slices.Contains(names, n.Name) {
						names = append(names, n.Name)
					}
				}
			}
			slices.Sort(names)
			// What was asked for is missing: exit 1, as cache get's miss.
			return fmt.Errorf("no cached answer of %s; the cache holds answers of: %s", stage, strings.Join(names, ", "))
		}
		return nil
	case "get":
		var found *llm.CacheEntry
		for _, c := range caches {
			e, err := c.Get(pos[0])
			if errors.Is(err, llm.ErrCacheMiss) {
				continue
			}
			if err != nil {
				return err
			}
			if found != nil && found.Key != e.Key {
				return fmt.Errorf("cache key %q is ambiguous; give more digits", pos[0])
			}
			if found == nil {
				found = &e
			}
		}
		if found == nil {
			return llm.ErrCacheMiss
		}
		enc.SetIndent("", "  ")
		return enc.Encode(found)
	default: // verify
		bad := 0
		for i, c := range caches {
			n := 0
			err := c.Check()
			if err == nil {
				err = c.List("", func(llm.CacheEntry) error { n++; return nil }) // every entry decodes
			}
			if err != nil {
				bad++
				fmt.Fprintf(stdout, "%-20s damaged: %v\n", segs[i].Name, err)
				continue
			}
			fmt.Fprintf(stdout, "%-20s ok, %d chat entries\n", segs[i].Name, n)
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d cache files damaged", bad, len(caches))
		}
		return nil
	}
}

// cacheStats prints each cache file's counts and, when there are several
// (workers' segments), their totals.
func cacheStats(stdout io.Writer, segs []llm.CacheSegment, caches []*llm.Cache) error {
	var bytes, slots int64
	chat, embed := map[string]int64{}, map[string]int64{}
	for i, c := range caches {
		st, err := c.Stats()
		if err != nil {
			return err
		}
		label := ""
		if segs[i].Name != "main" {
			label = " segment " + segs[i].Name
		}
		fmt.Fprintf(stdout, "cache%s %s (%d bytes)\n", label, st.Path, st.Bytes)
		for _, s := range st.Chat {
			fmt.Fprintf(stdout, "  chat       %-32s %8d\n", s.Name, s.Entries)
			chat[s.Name] += s.Entries
		}
		for _, s := range st.Embeddings {
			fmt.Fprintf(stdout, "  embeddings %-32s %8d\n", s.Name, s.Entries)
			embed[s.Name] += s.Entries
		}
		fmt.Fprintf(stdout, "  slots      %-32s %8d\n", "", st.Slots)
		bytes, slots = bytes+st.Bytes, slots+st.Slots
	}
	if len(caches) < 2 {
		return nil
	}
	// An answer a rerun found in one file is not written to another, so
	// the sums count each answer once unless a killed worker's redo wrote
	// it again (ls lists each key once).
	fmt.Fprintf(stdout, "all %d cache files (%d bytes)\n", len(caches), bytes)
	for _, name := range slices.Sorted(maps.Keys(chat)) {
		fmt.Fprintf(stdout, "  chat       %-32s %8d\n", name, chat[name])
	}
	for _, name := range slices.Sorted(maps.Keys(embed)) {
		fmt.Fprintf(stdout, "  embeddings %-32s %8d\n", name, embed[name])
	}
	fmt.Fprintf(stdout, "  slots      %-32s %8d\n", "", slots)
	return nil
}

// clipLine shortens s to one line of at most n characters.
func clipLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' {
			r = append(r[:i:i], '…')
			break
		}
	}
	if len(r) > n {
		r = append(r[:n:n], '…')
	}
	return string(r)
}
