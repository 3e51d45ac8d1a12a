// Package prompts holds the prompt templates of the LLM-backed stages.
//
// A template is a txtar archive: its comment describes the prompt, and each
// file is one chat message whose name is the role ("system", "user",
// "assistant"; repeat them for few-shot examples) and whose body is a
// text/template rendered against the stage's data. The built-in templates are
// embedded from this directory; pipeline.yaml can point a stage at its own
// file instead.
package prompts

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"text/template"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
)

//go:embed *.tmpl
var builtin embed.FS

// ReasonRenderFailed rejects a record whose data its prompt template could
// not render (an index past the record's turns, a slice past its text):
// the template passed Check but fails on this record.
const ReasonRenderFailed = "prompt_render_failed"

// A Template renders the messages of one prompt.
type Template struct {
	Name string // built-in name or the override's path
	Hash string // sha256 of the template text; part of every request's cache key
	Doc  string // the archive comment
	msgs []part
}

type part struct {
	role string
	tmpl *template.Template
}

var roles = map[string]bool{"system": true, "user": true, "assistant": true}

// Builtin returns the embedded template name (without the .tmpl suffix).
func Builtin(name string) (*Template, error) {
	b, err := builtin.ReadFile(name + ".tmpl")
	if err != nil {
		return nil, fmt.Errorf("prompt %q: no such built-in prompt", name)
	}
	return Parse(name, b)
}

// Load returns the template at path if path is set, else the built-in name.
func Load(name, path string) (*Template, error) {
	if path == "" {
		return Builtin(name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompt %q: %w", name, err)
	}
	return Parse(path, b)
}

// Names lists the built-in templates.
func Names() []string {
	ents, _ := builtin.ReadDir(".")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".tmpl"))
	}
	return names
}

// Parse parses a template archive.
func Parse(name string, text []byte) (t *Template, err error) {
	defer func() {
		// txtar.Parse panics on some malformed marker lines ("-- --").
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("prompt %s: malformed section marker (want lines like \"-- user --\")", name)
		}
	}()
	a := txtar.Parse(text)
	sum := sha256.Sum256(text)
	t = &Template{Name: name, Hash: hex.EncodeToString(sum[:8]), Doc: strings.TrimSpace(string(a.Comment))}
	if len(a.Files) == 0 {
		return nil, fmt.Errorf("prompt %s: no messages (want sections like \"-- system --\" and \"-- user --\")", name)
	}
	for i, f := range a.Files {
		if !roles[f.Name] {
			return nil, fmt.Errorf("prompt %s: section %d is %q; want system, user or assistant", name, i+1, f.Name)
		}
		tm, err := template.New(fmt.Sprintf("%s#%d", name, i+1)).Funcs(funcs).Option("missingkey=error").Parse(string(f.Data))
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", name, err)
		}
		t.msgs = append(t.msgs, part{role: f.Name, tmpl: tm})
	}
	return t, nil
}

// Render executes every message of the template against data.
// Surrounding blank lines of each section are trimmed. An error is a
// contract.Reject (ReasonRenderFailed) of the record the data is from.
func (t *Template) Render(data any) ([]llm.Message, error) {
	msgs, err := t.render(data)
	if err != nil {
		// Check caught what every record would fail; what is left
		// fails on this record's data: the record is rejected, not
		// the run stopped (a rerun would stop on it again).
		return nil, &contract.Reject{Reason: ReasonRenderFailed, Err: err}
	}
	return msgs, nil
}

func (t *Template) render(data any) ([]llm.Message, error) {
	out := make([]llm.Message, 0, len(t.msgs))
	var buf bytes.Buffer
	for _, p := range t.msgs {
		buf.Reset()
		if err := p.tmpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("prompt %s: %w", t.Name, err)
		}
		out = append(out, llm.Message{Role: p.role, Content: strings.TrimSpace(buf.String())})
	}
	return out, nil
}

// Check renders the template against every sample and returns the first
// error, so that a template that cannot render its data (a field its data
// type lacks, a function given the wrong arguments) fails where it is
// loaded, not on the first record, or on none when the failing branch is
// rare. The samples are values of the data type the template gets, with
// every field set (an {{if}} branch on an empty field is then not taken),
// plus, where a field can be empty in real data, one with it empty, so that
// both sides of such a branch are rendered.
func (t *Template) Check(samples ...any) error {
	if len(samples) == 0 {
		return fmt.Errorf("prompt %s: no sample data to check it against", t.Name)
	}
	for _, s := range samples {
		if _, err := t.render(s); err != nil {
			return err
		}
	}
	return nil
}

var funcs = template.FuncMap{
	// json renders v as compact JSON (raw JSON is kept as is).
	"json": func(v any) (string, error) {
		b, err := jsonout.Marshal(v)
		return string(b), err
	},
	// pretty renders v as JSON indented by two spaces.
	"pretty": func(v any) (string, error) {
		b, err := jsonout.MarshalIndent(v, "  ")
		return string(b), err
	},
	"join": strings.Join,
	"add":  func(a, b int) int { return a + b },
}
