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

// TestReferenceS2TWP compares Converter.Convert with `opencc -c s2twp.json`
// on every Chinese text of the corpus.
func TestReferenceS2TWP(t *testing.T) {
	compareWithReference(t, "s2twp.json", mustS2TWP(t), corpus(t), s2twpKnown)
}

// TestReferenceT2S does the same for t2s, on the corpus and on the
// reference's s2twp output of it (Traditional text, as t2s sees it in the
// translate stage's damage check).
func TestReferenceT2S(t *testing.T) {
	texts := corpus(t)
	trad := referenceConvert(t, "s2twp.json", texts)
	compareWithReference(t, "t2s.json", mustT2S(t), append(texts, trad...), nil)
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
	t.Logf("%s: %d of %d texts identical to the reference, %d listed differences", config, same, len(texts), listed)
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
