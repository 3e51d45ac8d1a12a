package verify

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestSpecialToolDefinitions holds MetaToolDef and GetUserInputDef to seed
// 000 A.4 word for word: Fig 6 as printed, Fig 4 with "required" moved
// inside "parameters".
func TestSpecialToolDefinitions(t *testing.T) {
	fig6 := `{"name": "get_user_input", "description": "Not invoke any additional functions.", "parameters": {"type": "object", "properties": {}}}`
	fig4 := `{"name": "meta_tool", "description": "Use this tool when no suitable tool is available in the current list, and an external tool is required to provide an accurate response to the user.",
		"parameters": {"type": "object", "properties": {
			"tool_description": {"description": "A clear and concise description of the external tool you need to use.", "type": "string"},
			"param_description": {"type": "array", "description": "A list of descriptions for each parameter required by the external tool.", "items": {"type": "string"}}},
			"required": ["tool_description", "param_description"]}}`
	for _, c := range []struct {
		name  string
		paper string
		got   any
	}{{"Fig 6", fig6, GetUserInputDef()}, {"Fig 4", fig4, MetaToolDef()}} {
		var want, got any
		if err := json.Unmarshal([]byte(c.paper), &want); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c.got)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %s\n want %s", c.name, b, c.paper)
		}
	}
}
