"""Render sharegpt samples with LLaMA-Factory's own templates, for
TestExportCutoffAgainstLLaMAFactory. Reads JSON lines {"template", "system",
"tools", "conversations"} on stdin and writes, per line, the JSON string of
the sample's whole rendering (every turn's source and target text, in order).
The tokenizer keeps text as it is and writes BOS/EOS as <BOS>/<EOS>, so the
caller counts the text itself. Needs `llamafactory` importable (PYTHONPATH)."""
import json
import sys

from llamafactory.data.template import TEMPLATES

ROLES = {"human": "user", "gpt": "assistant", "function_call": "function", "observation": "observation"}


class TextTokenizer:
    bos_token, eos_token = "<BOS>", "<EOS>"
    bos_token_id, eos_token_id = "<BOS>", "<EOS>"

    def encode(self, text, add_special_tokens=False):
        return [text]

    def convert_tokens_to_ids(self, token):
        return token


for line in sys.stdin:
    row = json.loads(line)
    tpl = TEMPLATES[row["template"]]
    msgs = [{"role": ROLES[t["from"]], "content": t["value"]} for t in row["conversations"]]
    pairs = tpl.encode_multiturn(TextTokenizer(), msgs, row["system"], row["tools"])
    print(json.dumps("".join("".join(src) + "".join(tgt) for src, tgt in pairs), ensure_ascii=False))
