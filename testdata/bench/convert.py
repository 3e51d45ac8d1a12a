#!/usr/bin/env python3
"""The baseline of `make bench`: a plain single-core Python conversion of a raw
dump (glaive, toolace or xlam, a JSON array) into LLaMA-Factory sharegpt JSON
Lines with decision tokens, the same conversion as augment's
ingest -> decision_tokens -> export (jsonl, template default), written the way
a data engineer would write it: json.load, a loop, json.dumps. It does not
validate, write Parquet or keep rejects; a row it cannot convert is skipped
and counted.

    python3 convert.py FORMAT DUMP OUT.jsonl

It prints "rows N written N skipped N" to stderr. Standard library only.
"""
import ast
import json
import re
import sys

ANSWER, USE_TOOL = "<|answer|>", "<|use_tool|>"

SIMPLE_TYPES = {
    "str": "string", "string": "string", "text": "string",
    "int": "integer", "integer": "integer", "long": "integer",
    "float": "number", "number": "number", "double": "number", "decimal": "number",
    "bool": "boolean", "boolean": "boolean",
    "list": "array", "array": "array", "tuple": "array", "set": "array",
    "dict": "object", "object": "object", "mapping": "object",
    "none": "null", "null": "null",
}


LIST_TYPE = re.compile(r"^\s*(?:List|list|Sequence|Set|set)\[(\w+)\]")


def compact(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def norm_type(t):
    """Maps a type name to JSON Schema; returns (type or None, optional)."""
    optional = False
    if "," in t and t.rsplit(",", 1)[1].strip().lower() == "optional":
        t, optional = t.rsplit(",", 1)[0], True
    return SIMPLE_TYPES.get(t.strip().lower()), optional


def norm_schema(s):
    """Normalises a JSON Schema node in place; returns whether it was optional."""
    if not isinstance(s, dict):
        return False
    optional = False
    if isinstance(s.get("type"), str) and s["type"] not in SIMPLE_TYPES.values():
        t, optional = norm_type(s["type"])
        m = LIST_TYPE.match(s["type"])
        if t:
            s["type"] = t
        elif m:
            s["type"] = "array"
            item, _ = norm_type(m.group(1))
            if item and "items" not in s:
                s["items"] = {"type": item}
        else:
            del s["type"]
    if "required" in s and s["required"] is None:
        del s["required"]
    props = s.get("properties")
    if isinstance(props, dict):
        opts = {k: norm_schema(v) for k, v in props.items()}
        if any(opts.values()) and "required" not in s:
            s["required"] = [k for k, o in opts.items() if not o]
    for k in ("items", "additionalProperties"):
        if isinstance(s.get(k), dict):
            norm_schema(s[k])
    return optional


def norm_tool(t):
    if "function" in t and "name" not in t:
        t = t["function"]
    p = t.get("parameters") or {}
    if "type" in p or "properties" in p:
        norm_schema(p)
    else:  # xlam's flat map of parameters
        req = [k for k, v in p.items() if not norm_schema(v)]
        p = {"type": "object", "properties": p}
        if req:
            p["required"] = req
    p.setdefault("type", "object")
    p.setdefault("properties", {})
    req = t.get("required")
    if isinstance(req, list) and req and "required" not in p:
        p["required"] = req
    return {"name": t["name"], "description": t.get("description", ""), "parameters": p}


def call_value(calls):
    js = ", ".join('{"name": %s, "arguments": %s}' % (json.dumps(c["name"], ensure_ascii=False), compact(c["arguments"]))
                   for c in calls)
    if len(calls) > 1:
        js = "[" + js + "]"
    return USE_TOOL + "<tool_call>" + js + "</tool_call>"


def result_value(text):
    try:
        v = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], dict) and "results" in v[0]:
        v = v[0]["results"]
    return compact(v)


def sample(system, tools, turns):
    while turns and turns[-1]["from"] not in ("gpt", "function_call"):
        turns.pop()
    if not turns:
        return None
    return compact({"conversations": turns, "system": system, "tools": compact(tools)})


# --- xlam -------------------------------------------------------------------

def xlam(row):
    tools = [norm_tool(t) for t in json.loads(row["tools"])]
    calls = json.loads(row["answers"])
    turns = [{"from": "human", "value": row["query"]}]
    if calls:
        turns.append({"from": "function_call", "value": call_value(calls)})
    return sample("", tools, turns)


# --- glaive -----------------------------------------------------------------

GLAIVE_TOOLS = "SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -"
GLAIVE_NONE = "SYSTEM: You are a helpful assistant, with no access to external functions."
GLAIVE_TURN = re.compile(r"^(USER|ASSISTANT|FUNCTION RESPONSE):", re.M)
DECODER = json.JSONDecoder()


def glaive_call(body):
    body = body[len("<functioncall>"):].strip()
    m = re.match(r'\{"name": (".*?"), "arguments": \'(.*)\'\}$', body, re.S)
    if m:
        return {"name": json.loads(m.group(1)), "arguments": json.loads(m.group(2))}
    c = json.loads(body)
    if isinstance(c.get("arguments"), str):
        c["arguments"] = json.loads(c["arguments"])
    return c


def glaive(row):
    sys_text, tools = row["system"], []
    if sys_text.startswith(GLAIVE_TOOLS):
        text, pos = sys_text[len(GLAIVE_TOOLS):], 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text) or text[pos] != "{":
                break
            t, pos = DECODER.raw_decode(text, pos)
            tools.append(norm_tool(t))
        system = text[pos:].strip()
    elif sys_text.startswith(GLAIVE_NONE):
        system = sys_text[len(GLAIVE_NONE):].strip()
    else:
        system = sys_text.strip().removeprefix("SYSTEM:").strip()
    chat = row["chat"]
    marks = list(GLAIVE_TURN.finditer(chat))
    turns = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(chat)
        body = chat[m.end():end].strip().removesuffix("<|endoftext|>").strip()
        role = m.group(1)
        if role == "USER":
            turns.append({"from": "human", "value": body})
        elif role == "FUNCTION RESPONSE":
            turns.append({"from": "observation", "value": result_value(body)})
        elif body.startswith("<functioncall>"):
            turns.append({"from": "function_call", "value": call_value([glaive_call(body)])})
        else:
            turns.append({"from": "gpt", "value": ANSWER + body})
    return sample(system, tools, turns)


# --- toolace ----------------------------------------------------------------

TOOLACE_LIST = "Here is a list of functions in JSON format that you can invoke:\n"


def py_calls(text):
    """Parses [f(a=1), g(b="x")] into calls; None when it is not one."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith(")]")):
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    calls = []
    for c in tree.elts:
        if not isinstance(c, ast.Call):
            return None
        name = ast.unparse(c.func)
        calls.append({"name": name, "arguments": {k.arg: ast.literal_eval(k.value) for k in c.keywords}})
    return calls


def toolace(row):
    sys_text, tools, system = row["system"], [], row["system"].strip()
    at = sys_text.find(TOOLACE_LIST)
    if at >= 0:
        arr, end = DECODER.raw_decode(sys_text, at + len(TOOLACE_LIST))
        tools = [norm_tool(t) for t in arr]
        system = ""
    turns = []
    for t in row["conversations"]:
        role, value = t["from"], t["value"]
        if role == "user":
            turns.append({"from": "human", "value": value})
        elif role == "tool":
            turns.append({"from": "observation", "value": result_value(value)})
        else:
            calls = py_calls(value)
            if calls:
                turns.append({"from": "function_call", "value": call_value(calls)})
            else:
                turns.append({"from": "gpt", "value": ANSWER + value})
    return sample(system, tools, turns)


CONVERT = {"xlam": xlam, "glaive": glaive, "toolace": toolace}


def main():
    fmt, dump, out = sys.argv[1:4]
    convert = CONVERT[fmt]
    with open(dump, encoding="utf-8") as f:
        rows = json.load(f)
    written = skipped = 0
    with open(out, "w", encoding="utf-8") as w:
        for row in rows:
            try:
                line = convert(row)
            except (ValueError, KeyError, TypeError, AttributeError, SyntaxError):
                line = None
            if line is None:
                skipped += 1
                continue
            w.write(line)
            w.write("\n")
            written += 1
    print("rows %d written %d skipped %d" % (len(rows), written, skipped), file=sys.stderr)


if __name__ == "__main__":
    main()
