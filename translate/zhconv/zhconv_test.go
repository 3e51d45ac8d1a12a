package zhconv

import "testing"

func mustS2TWP(t testing.TB) *Converter {
	t.Helper()
	c, err := S2TWP()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustT2S(t testing.TB) *Converter {
	t.Helper()
	c, err := T2S()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestS2TWP: outputs of the reference, OpenCC 1.1.6 `opencc -c s2twp.json`.
func TestS2TWP(t *testing.T) {
	cases := []struct{ in, want string }{
		{"来确保存储在区块链上", "來確保儲存在區塊鏈上"},
		{"软件", "軟體"},
		{"网络", "網路"},
		{"信息", "資訊"},
		{"鼠标", "滑鼠"},
		{"内存", "記憶體"},
		{"打印机", "印表機"},
		{"视频", "影片"},
		{"我需要为John Doe生成一张发票。", "我需要為John Doe生成一張發票。"},
		{"軟體已經是繁體", "軟體已經是繁體"},
		{"plain ASCII <b>&</b>", "plain ASCII <b>&</b>"},
		{"", ""},
		{"bad \xff utf8 软件", "bad \xff utf8 软件"},
	}
	c := mustS2TWP(t)
	for _, tc := range cases {
		if got := c.Convert(tc.in); got != tc.want {
			t.Errorf("S2TWP(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
