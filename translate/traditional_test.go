package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// setArg sets the string argument key of call j of turn i of r.
func setArg(t testing.TB, r *record.Record, i, j int, key, v string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Messages[i].Calls[j].Arguments, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = v
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r.Messages[i].Calls[j].Arguments = b
}

// TestTeacherKeepsTaiwanText: the teacher's Taiwan Traditional answer is
// written as the teacher wrote it, in text and in arguments alike, and the
// judge sees that value; s2twp over it would double 演 (TWPhrases
// 算法→演算法) and turn 文件 ("document") into 檔案 ("file"). Only
// Simplified-only characters are repaired, one by one (个→個).
func TestTeacherKeepsTaiwanText(t *testing.T) {
	src := loadRecord(t)
	setArg(t, src, 1, 0, "notes", "a quiet room; document the sorting algorithm")
	ans := okAnswer(t)
	turn(ans, 3)["content"] = "我找到「排序演算法」的說明，會為這個演算法撰寫文件。"
	args(ans, 1, 0)["notes"] = "安靜的房間；為排序演算法撰寫文件"
	f := &teacher{answers: []string{mustJSON(t, ans)}}
	j := &judge{}
	out, err := newTeacher(t, Config{}, f, j).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Messages[3].Content, "我找到「排序演算法」的說明，會為這個演算法撰寫文件。"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(out.Messages[1].Calls[0].Arguments, &m); err != nil {
		t.Fatal(err)
	}
	if got, want := m["notes"], "安靜的房間；為排序演算法撰寫文件"; got != want {
		t.Errorf("notes %q, want %q", got, want)
	}
	if got, want := out.Messages[1].Reasoning, "使用者想找飯店並查詢天氣；這兩個呼叫互不相依。"; got != want {
		t.Errorf("reasoning %q, want %q (个 repaired)", got, want)
	}
	if !strings.Contains(strings.Join(j.asked, "\n"), "→安靜的房間；為排序演算法撰寫文件") {
		t.Errorf("the judge was not shown the value written: %q", j.asked)
	}
}

// TestConvertLeavesTraditional: convert mode converts only records with a
// Simplified-only character; a Traditional record (a re-ingested zh-TW
// export tagged lang=zh) passes on unchanged with its tags, and a Japanese
// or Korean one is not Chinese.
func TestConvertLeavesTraditional(t *testing.T) {
	tr, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStage(tr, "translate", nil)
	for _, text := range []string{
		"請為排序演算法撰寫文件，這是反烏托邦小說；為了解決問題。",
		"台風が来ますか",
		"태풍이 와요? 来",
	} {
		r := &record.Record{ID: "x", Messages: []record.Message{{Role: "user", Content: text}}}
		r.SetTag("lang", "zh")
		got, err := st.Process(t.Context(), r)
		if err != nil || len(got) != 1 || got[0].Messages[0].Content != text || got[0].Tag("lang") != "zh" {
			t.Errorf("%q: got %v, %v; want it passed on unchanged", text, got, err)
		}
		_, err = tr.Record(t.Context(), r)
		var rej *contract.Reject
		if !errors.As(err, &rej) || rej.Reason != ReasonNotChinese {
			t.Errorf("Record(%q): %v, want reject %s", text, err, ReasonNotChinese)
		}
	}
	// Simplified input is still converted as OpenCC s2twp does.
	r := &record.Record{ID: "y", Messages: []record.Message{{Role: "user", Content: "排序算法的软件文件"}}}
	got, err := st.Process(t.Context(), r)
	if err != nil || len(got) != 1 || got[0].Messages[0].Content != "排序演算法的軟體檔案" || got[0].Tag("lang") != Lang {
		t.Errorf("Simplified record: %v, %v", got, err)
	}
}

// TestTeacherConvertsEnumNonMember: a value at an enum position that is not
// a member must be copied by the teacher, and is then converted like other
// locked values (中国菜 in a zh-TW record was left Simplified).
func TestTeacherConvertsEnumNonMember(t *testing.T) {
	src := loadRecord(t)
	setArg(t, src, 1, 0, "sort_by", "中国菜")
	ans := okAnswer(t)
	args(ans, 1, 0)["sort_by"] = "中国菜"
	f := &teacher{answers: []string{mustJSON(t, ans)}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.Messages[1].Calls[0].Arguments, &m); err != nil {
		t.Fatal(err)
	}
	if got := m["sort_by"]; got != "中國菜" {
		t.Errorf("sort_by %q, want 中國菜", got)
	}
}
