package zhconv

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The differential tests run the C++ reference, Debian's opencc package
// (OpenCC 1.1.6, the release whose dictionaries are embedded), on a corpus
// and require our output to be the same, text by text. .ci/run installs the
// package; without it the tests skip and say so.

// tricky are compounds whose phrases overlap, where a conversion that matches
// Taiwan phrases across segments corrupts the text (确保|存储 → 確儲存儲), and
// common words the Taiwan phrase dictionary rewrites.
var tricky = []string{
	"来确保存储在区块链上", "确保存储", "并存储", "并存储在数据库中", "保存储存", "计算机科学", "计算机科学家",
	"数据库", "内存", "内存储器", "软件", "软件包", "硬件", "打印", "打印机", "视频", "视频文件", "信息",
	"信息安全", "网络", "网络服务器", "程序员", "程序", "服务器", "默认", "默认值", "文件夹", "文件", "鼠标",
	"U盘", "SQL注入攻击", "面向对象", "正则表达式", "算法", "数据", "人工智能", "操作系统", "源代码",
	"项目管理", "质量", "只读存储器", "随机存取存储器", "发送短信", "移动电话", "出租车", "自行车",
	"头发", "发展", "干燥", "干部", "皇后", "后来", "永恒生命", "北马里亚纳群岛", "乾隆皇帝",
	"我们需要确保数据的完整性和安全性", "这个程序会把信息存储到服务器的内存里", "请在默认文件夹中打开视频",
	"维基百科是一个网络百科全书", "它们并存在于同一个系统中",
}

// TestReferenceS2TWP compares Converter.Convert with the reference's
// s2twp.json on every Chinese text of the corpus, and again on the
// reference's output (Traditional text, as teacher answers are), where
// OpenCC is not always idempotent (萬里→萬裡).
func TestReferenceS2TWP(t *testing.T) {
	texts := corpus(t)
	texts = append(texts, referenceConvert(t, "s2twp.json", texts)...)
	if skip := installedDictionariesDiffer(t, STPhrases, STCharacters, "TWPhrases", TWVariants); skip != "" {
		t.Skip(skip)
	}
	compareWithReference(t, "s2twp.json", mustS2TWP(t), texts, s2twpKnown)
}

// TestReferenceT2S does the same for t2s, on the corpus and on the
// reference's s2twp output of it (the translate stage reads conversions
// back with t2s).
func TestReferenceT2S(t *testing.T) {
	texts := corpus(t)
	texts = append(texts, referenceConvert(t, "s2twp.json", texts)...)
	if skip := installedDictionariesDiffer(t, TSPhrases, TSCharacters); skip != "" {
		t.Skip(skip)
	}
	compareWithReference(t, "t2s.json", mustT2S(t), texts, nil)
}

// TestReferenceAlgorithm runs the reference with our embedded dictionaries
// (as text dictionaries in configurations like its own), so that it tests
// the segmentation and the conversion chain whatever release of OpenCC is
// installed: no difference is allowed.
func TestReferenceAlgorithm(t *testing.T) {
	texts := corpus(t)
	dir := t.TempDir()
	var tw []byte
	for _, name := range append([]string{STPhrases, STCharacters, TWVariants, TSPhrases, TSCharacters}, TWPhrases...) {
		b, err := files.ReadFile("dict/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(TWPhrases, name) {
			tw = append(tw, b...)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("TWPhrases.txt", string(tw))
	text := func(f string) string { return `{"type": "text", "file": "` + f + `"}` }
	s2twp := write("s2twp-embedded.json", `{"name": "s2twp, embedded dictionaries",
		"segmentation": {"type": "mmseg", "dict": `+text("STPhrases.txt")+`},
		"conversion_chain": [
			{"dict": {"type": "group", "dicts": [`+text("STPhrases.txt")+`, `+text("STCharacters.txt")+`]}},
			{"dict": `+text("TWPhrases.txt")+`},
			{"dict": `+text("TWVariants.txt")+`}]}`)
	t2s := write("t2s-embedded.json", `{"name": "t2s, embedded dictionaries",
		"segmentation": {"type": "mmseg", "dict": `+text("TSPhrases.txt")+`},
		"conversion_chain": [{"dict": {"type": "group", "dicts": [`+text("TSPhrases.txt")+`, `+text("TSCharacters.txt")+`]}}]}`)
	texts = append(texts, referenceConvert(t, s2twp, texts)...)
	compareWithReference(t, s2twp, mustS2TWP(t), texts, nil)
	compareWithReference(t, t2s, mustT2S(t), texts, nil)
}

// installedDictionariesDiffer compares the installed reference's compiled
// dictionaries (dumped with opencc_dict) with the embedded ones and returns
// why the comparison with its stock configurations cannot hold, or "" when
// they are the same data (or opencc_dict is missing: then the comparison
// runs and any difference shows).
func installedDictionariesDiffer(t *testing.T, names ...string) string {
	t.Helper()
	dump, err := exec.LookPath("opencc_dict")
	if err != nil {
		return ""
	}
	bin, _ := exec.LookPath("opencc")
	share := filepath.Join(filepath.Dir(filepath.Dir(bin)), "share", "opencc")
	var differ []string
	for _, name := range names {
		base := strings.TrimSuffix(name, ".txt")
		out := filepath.Join(t.TempDir(), base+".txt")
		cmd := exec.Command(dump, "-i", filepath.Join(share, base+".ocd2"), "-o", out, "-f", "ocd2", "-t", "text")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Logf("opencc_dict %s: %v: %s", base, err, b)
			return ""
		}
		theirs, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files := []string{name}
		if base == "TWPhrases" {
			files = TWPhrases
		}
		var ours []string
		for _, f := range files {
			es, err := Entries(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				ours = append(ours, e.Key+"\t"+strings.Join(e.Values, " "))
			}
		}
		var ref []string
		for _, l := range strings.Split(strings.TrimSpace(string(theirs)), "\n") {
			ref = append(ref, strings.TrimSuffix(l, "\r"))
		}
		slices.Sort(ours)
		slices.Sort(ref)
		if !slices.Equal(ours, ref) {
			differ = append(differ, base)
		}
	}
	if len(differ) == 0 {
		t.Logf("the installed OpenCC's %s hold the same entries as the embedded dictionaries", strings.Join(names, ", "))
		return ""
	}
	return "the installed OpenCC's dictionaries " + strings.Join(differ, ", ") + " are not the embedded release's (1.1.6), so its stock configurations would differ by data, not by algorithm; TestReferenceAlgorithm compares the algorithm on our dictionaries"
}

// A known difference is one text on which we differ from the reference on
// purpose or because the dictionaries differ; every entry says why. None are
// needed with the embedded 1.1.6 data; the tables stay so that a dictionary
// upgrade lists its differences here instead of hiding them.
type known struct {
	ours, ref string
	why       string
}

var s2twpKnown = map[string]known{}

// compareWithReference converts texts with c and with the reference's
// configuration config (a name in its data directory or a path) and
// requires the same output, or a listed difference.
func compareWithReference(t *testing.T, config string, c *Converter, texts []string, allow map[string]known) {
	t.Helper()
	got := referenceConvert(t, config, texts)
	same, listed := 0, 0
	used := make(map[string]bool)
	for i, src := range texts {
		ours := c.Convert(src)
		if ours == got[i] {
			same++
			continue
		}
		if k, ok := allow[src]; ok && k.ours == ours && k.ref == got[i] {
			if k.why == "" {
				t.Errorf("%s: the known difference on %q gives no reason", config, src)
			}
			listed++
			used[src] = true
			continue
		}
		t.Errorf("%s differs from the reference on %q:\n ours %q\n  ref %q", config, src, ours, got[i])
	}
	for src := range allow {
		if !used[src] {
			t.Errorf("%s: known difference on %q no longer seen; remove it", config, src)
		}
	}
	t.Logf("%s: %d of %d texts identical to the reference, %d listed differences", filepath.Base(config), same, len(texts), listed)
}

// referenceConvert converts texts with the opencc binary in one run: the
// texts go in on lines of their own between separator lines. The binary
// converts its standard input line by line and no dictionary key holds a
// line break or the separator's characters, so each text converts as it
// would alone.
func referenceConvert(t *testing.T, config string, texts []string) []string {
	t.Helper()
	bin, err := exec.LookPath("opencc")
	if err != nil {
		t.Skip("the reference OpenCC is not installed (no opencc on PATH; Debian: apt-get install opencc, as .ci/run does), so the differential test cannot run")
	}
	const sep = "\n@@augment-zhconv-separator@@\n"
	var in strings.Builder
	for i, s := range texts {
		if strings.Contains(s, sep[1:len(sep)-1]) || strings.ContainsRune(s, 0) {
			t.Fatalf("text %d holds the separator or a NUL; leave it out of the corpus", i)
		}
		if i > 0 {
			in.WriteString(sep)
		}
		in.WriteString(s)
	}
	cmd := exec.Command(bin, "-c", config)
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("opencc -c %s: %v: %s", config, err, stderr.String())
	}
	got := strings.Split(string(out), sep)
	if len(got) != len(texts) {
		t.Fatalf("opencc -c %s returned %d texts for %d", config, len(got), len(texts))
	}
	return got
}

// corpus returns, deduplicated and sorted, the tricky compounds, the Chinese
// strings of the demo's zh dump and those of every zh file under
// ../shared/data (when present beside the repository): every string value
// with a Han character, also inside strings that hold JSON (tool arguments,
// results).
func corpus(t testing.TB) []string {
	t.Helper()
	set := make(map[string]bool)
	for _, s := range tricky {
		set[s] = true
	}
	root := repoRoot(t)
	files := []string{filepath.Join(root, "testdata", "demo", "dumps", "zh.jsonl")}
	shared := filepath.Join(root, "..", "shared", "data")
	if _, err := os.Stat(shared); err != nil {
		t.Logf("../shared/data is absent: the corpus has the tricky compounds and the demo's zh dump only")
	} else {
		err := filepath.WalkDir(shared, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.Contains(d.Name(), "zh") && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl")) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for dec.More() {
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			hanStrings(v, set)
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func hanStrings(v any, set map[string]bool) {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) || !strings.ContainsFunc(v, func(r rune) bool { return unicode.Is(unicode.Han, r) }) {
			return
		}
		set[v] = true
		var inner any
		if t := strings.TrimSpace(v); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Unmarshal([]byte(t), &inner) == nil {
			hanStrings(inner, set)
		}
	case []any:
		for _, e := range v {
			hanStrings(e, set)
		}
	case map[string]any:
		for _, e := range v {
			hanStrings(e, set)
		}
	}
}

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
