package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/augmentdata/augment/stages/llm"
)

// cmdCache inspects a run's request cache (read-only; safe while no run
// holds it).
func cmdCache(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"cache: want a subcommand: stats, ls or get"}
	}
	sub, args := args[0], args[1:]
	fs := newFlags("cache "+sub, stderr, "[-dir out] "+map[string]string{"get": "KEY", "ls": "[STAGE@VERSION]"}[sub])
	dir := fs.String("dir", "out", "the run's output directory (pipeline.yaml's output.dir)")
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	c, err := llm.OpenCacheReadOnly(filepath.Join(*dir, "cache"))
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	switch sub {
	case "stats":
		st, err := c.Stats()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cache %s (%d bytes)\n", st.Path, st.Bytes)
		for _, s := range st.Chat {
			fmt.Fprintf(stdout, "  chat       %-32s %8d\n", s.Name, s.Entries)
		}
		for _, s := range st.Embeddings {
			fmt.Fprintf(stdout, "  embeddings %-32s %8d\n", s.Name, s.Entries)
		}
		fmt.Fprintf(stdout, "  slots      %-32s %8d\n", "", st.Slots)
		return nil
	case "ls":
		stage := ""
		if fs.NArg() > 0 {
			stage = fs.Arg(0)
		}
		return c.List(stage, func(e llm.CacheEntry) error {
			fmt.Fprintf(stdout, "%s %s %s\n", e.Key, e.Stage, clipLine(e.Response.Content, 80))
			return nil
		})
	case "get":
		if fs.NArg() != 1 {
			return usageError{"cache get: want one key (at least 8 hex digits)"}
		}
		e, err := c.Get(fs.Arg(0))
		if err != nil {
			return err
		}
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	return usageError{fmt.Sprintf("cache: unknown subcommand %q (want stats, ls or get)", sub)}
}

func flagErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
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
