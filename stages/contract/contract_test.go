package contract

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rowError stands for the errors that carry a reason of their own (the
// teacher layer's answer errors, the readers' row errors).
type rowError struct{ reason string }

func (e *rowError) Error() string        { return "row: " + e.reason }
func (e *rowError) RejectReason() string { return e.reason }

func TestClassify(t *testing.T) {
	rej := Rejectf("bad_call", "turn %d", 3)
	for _, tc := range []struct {
		name    string
		outputs int
		err     error
		kind    Kind
		reason  string
	}{
		{"one record", 1, nil, Kept, ""},
		{"added records", 3, nil, Kept, ""},
		{"no records", 0, nil, Filtered, "empty"},
		{"filter", 0, &Filter{Reason: "quota_full"}, Filtered, "quota_full"},
		{"wrapped filter", 0, fmt.Errorf("sample: %w", &Filter{Reason: "unmatched"}), Filtered, "unmatched"},
		{"reject", 0, rej, Rejected, "bad_call"},
		{"reject wrapped with %w", 0, fmt.Errorf("record 7: %w", rej), Rejected, "bad_call"},
		{"own reject type", 0, fmt.Errorf("ask: %w", &rowError{"llm_truncated"}), Rejected, "llm_truncated"},
		{"reject with cause", 0, &Reject{Reason: "llm_invalid_json", Err: errors.New("eof")}, Rejected, "llm_invalid_json"},
		{"plain error", 0, errors.New("disk full"), Stop, ""},
		{"fatal reject", 0, Fatal(fmt.Errorf("embedding the library: %w", rej)), Stop, ""},
		{"fatal wrapped again", 0, fmt.Errorf("stage: %w", Fatal(rej)), Stop, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, reason := Classify(tc.outputs, tc.err)
			if kind != tc.kind || reason != tc.reason {
				t.Errorf("Classify = %v %q, want %v %q", kind, reason, tc.kind, tc.reason)
			}
		})
	}
}

func TestRejectText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&Reject{Reason: "r", Detail: "d"}, "r: d"},
		{&Reject{Reason: "r", Err: errors.New("e")}, "r: e"},
		{&Reject{Reason: "r", Detail: "d", Err: errors.New("e")}, "r: d"},
		{&Reject{Reason: "r"}, "r"},
		{Fatal(errors.New("x")), "x"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v: Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
	if Fatal(nil) != nil {
		t.Error("Fatal(nil) != nil")
	}
}

// TestErrorfWrapsErrors keeps the rule of the package doc: an error formatted
// into another with %v or %s (or its Error() text) loses its reject reason,
// and a record the code meant to reject would stop the run. Every fmt.Errorf
// in the module (tests aside) must format an error value with %w; code that
// means to stop the run says so with Fatal.
func TestErrorfWrapsErrors(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isErrorf(call) || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			verbs := verbsOf(format)
			for i, arg := range call.Args[1:] {
				if i < len(verbs) && verbs[i] != 'w' && isErrorValue(arg) {
					rel, _ := filepath.Rel(root, path)
					bad = append(bad, fmt.Sprintf("%s:%d: %%%c formats an error", filepath.ToSlash(rel), fset.Position(arg.Pos()).Line, verbs[i]))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("fmt.Errorf must wrap errors with %%w (or mark the result with contract.Fatal):\n%s", strings.Join(bad, "\n"))
	}
}

// moduleRoot is the module's directory: this package is stages/contract.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

func isErrorf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Errorf" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "fmt"
}

// isErrorValue reports whether arg looks like an error by the module's
// naming: err, perr, e.Err, or x.Error().
func isErrorValue(arg ast.Expr) bool {
	name := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name
		case *ast.SelectorExpr:
			return e.Sel.Name
		}
		return ""
	}
	if call, ok := arg.(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(call.Args) == 0 {
			return isErrorValue(sel.X)
		}
		return false
	}
	n := name(arg)
	return n == "err" || n == "Err" || strings.HasSuffix(n, "Err") || (len(n) <= 5 && strings.HasSuffix(n, "err"))
}

// verbsOf returns the verb letter of each operand of a Printf format, in
// order; %% takes none. Explicit argument indexes are not used in the module.
func verbsOf(format string) []byte {
	var verbs []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[i]) >= 0 {
			if format[i] == '*' {
				verbs = append(verbs, '*')
			}
			i++
		}
		if i < len(format) && format[i] != '%' {
			verbs = append(verbs, format[i])
		}
	}
	return verbs
}
