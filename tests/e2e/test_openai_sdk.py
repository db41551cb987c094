"""The official OpenAI Node SDK (npm `openai`, installed by `make deps`) as the client of
`nanovllm serve` on loopback, with a tiny random Qwen3 model: chat whole and streamed, n = 3,
logprobs, tools (auto / required, streamed tool_calls), reasoning_content, response_format
json_schema on 100 requests, completions streamed and echoed, /tokenize. The client script is
openai_sdk_client.mjs; the JSON it got is validated here against the schemas with Debian's
python3-jsonschema. Skips (77) when node, the npm package or the binary is absent."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_util as su  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_DIR = os.path.join(ROOT, "third_party", "npm", "node_modules")

# Every string and array is bounded so that a random model (it repeats its last token) ends within
# max_tokens; the grammar bounds whitespace and digit runs itself.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "active": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
        "owner": {"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]},
        "note": {"type": "string", "pattern": "^[a-z]{1,5}$"},
    },
    "required": ["name", "age", "active", "color", "owner"],
    "additionalProperties": False,
    "$defs": {"person": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9}},
                         "required": ["id"], "additionalProperties": False}},
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "weather",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"enum": ["Paris", "Rome"]},
                                          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                                          "required": ["city", "days"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {},
                                                                      "additionalProperties": False}}},
]


def main():
    node = shutil.which("node")
    if not node:
        print("SKIP: node is not installed (make deps)")
        return su.SKIP
    if not os.path.isfile(os.path.join(NPM_DIR, "openai", "package.json")):
        print(f"SKIP: the npm package openai is not in {NPM_DIR} (make deps)")
        return su.SKIP
    try:
        import jsonschema
    except ImportError:
        print("SKIP: python3-jsonschema is not installed (make deps)")
        return su.SKIP
    setup = su.setup_tiny_model("openai_sdk_")
    if isinstance(setup, str):
        print("SKIP: " + setup)
        return su.SKIP
    tmp, model = setup
    try:
        with su.Server(["--model", model], os.path.join(tmp, "server.log")) as srv:
            env = dict(os.environ, BASE_URL=f"http://{su.HOST}:{srv.port}/v1", MODEL=model, NPM_DIR=NPM_DIR,
                       SCHEMA=json.dumps(SCHEMA), TOOLS=json.dumps(TOOLS))
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_sdk_client.mjs")
            p = subprocess.run([node, script], env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(p.stdout[-4000:], p.stderr[-8000:])
                with open(os.path.join(tmp, "server.log"), errors="replace") as f:
                    print("server log tail:", f.read()[-3000:])
                return 1
        line = [l for l in p.stdout.splitlines() if l.startswith("DOCS ")]
        assert line, "the client printed no documents"
        docs = json.loads(line[-1][5:])
        assert len(docs["schema"]) == 100, len(docs["schema"])
        validator = jsonschema.Draft202012Validator(SCHEMA)
        for d in docs["schema"]:
            validator.validate(d)
        params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        assert docs["tool_args"], "no tool calls"
        for c in docs["tool_args"]:
            jsonschema.Draft202012Validator(params[c["tool"]]).validate(c["args"])
        print(f"ok: 100 json_schema outputs and {len(docs['tool_args'])} tool calls validate")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
