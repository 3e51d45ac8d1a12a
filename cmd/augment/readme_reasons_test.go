package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// reasonDoc marks a const block (or a const) whose string values are
// reject or filter reasons: "Reject reasons of …", "Filter and reject
// reasons of …", "X is the reject reason of …", "X rejects …".
var reasonDoc = regexp.MustCompile(`(?i)\b(reject|filter) (and (reject|filter) )?reasons\b|\bis the reject reason\b|^\w+ rejects\b`)

// classDoc marks a block of failure classes whose reject reason is a
// prefix + the class ("llm_error_" + class is the reject reason …).
var classDoc = regexp.MustCompile(`"([a-z_]+)" \+ class is the reject\s+reason`)

// notStageReasons are reason constants no stage gives a record: the
// reason a package function returns that its stage turns into something
// else. Each says why.
var notStageReasons = map[string]string{
	"translate_not_chinese": "translate.Record's reject; the stage passes or filters such records (non_chinese), never rejects them",
}

// TestREADMENamesEveryReason: every reject or filter reason constant of
// the stages (and of the teacher, verify, translate and prompt packages
// they use) is named in README.md, backticked, so a user who meets one in
// a rejects file, stats or report.html can look it up. The constants are
// found in the source by their doc comments (reasonDoc, classDoc) or by a
// name starting with Reason; literal reasons written where a reject or
// filter is made (literalReason) are checked too.
func TestREADMENamesEveryReason(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	found := 0
	for _, dir := range []string{"stages", "stages/llm", "verify", "translate", "prompts"} {
		files, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				if r, pos, ok := literalReason(n); ok {
					found++
					if !strings.Contains(readme, "`"+r+"`") && !strings.Contains(readme, "`"+r+"<") {
						t.Errorf("%s: reason %q is not named in README.md", fset.Position(pos), r)
					}
				}
				return true
			})
			for _, d := range af.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				doc := g.Doc.Text()
				prefix := ""
				if m := classDoc.FindStringSubmatch(doc); m != nil {
					prefix = m[1]
				}
				block := prefix != "" || reasonDoc.MatchString(doc)
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						if !block && !strings.HasPrefix(name.Name, "Reason") && !reasonDoc.MatchString(vs.Doc.Text()) {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						found++
						if _, skip := notStageReasons[v]; skip {
							continue
						}
						if strings.Contains(readme, "`"+prefix+v+"`") || prefix != "" && strings.Contains(readme, "`"+v+"`") {
							continue
						}
						t.Errorf("%s: %s = %q is a reason README.md does not name (as `%s%s`)", fset.Position(name.Pos()), name.Name, v, prefix, v)
					}
				}
			}
		}
	}
	// The stages have some 90 such constants and 20 literal reasons; far
	// fewer means the source this test reads changed and it checks nothing.
	if found < 80 {
		t.Fatalf("found %d reason constants; the doc comments the test reads must have changed", found)
	}
}

// identName is the name e refers to: x for x and pkg.x, else "".
func identName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// literalReason returns the reason a reject or filter is made with when it
// is written as a string literal there: contract.Rejectf("r", …) (or a
// package's rejectf), &contract.Reject{Reason: "r"}, &contract.Filter{…},
// &AnswerError{…}; "prefix" + x gives the prefix (README: `prefix<…>`).
func literalReason(n ast.Node) (string, token.Pos, bool) {
	var arg ast.Expr
	switch n := n.(type) {
	case *ast.CallExpr:
		if !strings.EqualFold(identName(n.Fun), "rejectf") || len(n.Args) == 0 {
			return "", 0, false
		}
		arg = n.Args[0]
	case *ast.CompositeLit:
		if typ := identName(n.Type); typ != "Reject" && typ != "Filter" && typ != "AnswerError" {
			return "", 0, false
		}
		for _, e := range n.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
					arg = kv.Value
				}
			}
		}
	}
	if b, ok := arg.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		arg = b.X
	}
	lit, ok := arg.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", 0, false
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", 0, false
	}
	return v, lit.Pos(), true
}
