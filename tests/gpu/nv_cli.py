"""Runs the `nanovllm` CLI for gpu-check's comparison scripts, and their shared command line
(NANOVLLM_BIN MODEL_DIR... --json-out FILE) and per-model loop (numpy only)."""
import argparse
import json
import os
import random
import subprocess
import tempfile

import numpy as np


def model_config(model_dir, nv=None):
    """The model's config.json; for a .gguf file, the config nanovllm derives from its metadata
    (`nanovllm gguf-info --json`, so nv is needed)."""
    if model_dir.endswith(".gguf") and os.path.isfile(model_dir):
        if nv is None:
            raise ValueError(f"{model_dir}: a GGUF file's config needs the nanovllm binary")
        return json.loads(run(nv, ["gguf-info", "--json", model_dir]))["config"]
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def random_prompt(vocab, length, seed):
    """`length` token ids in [3, min(vocab, 5000)): no BOS/EOS/pad ids of the small vocabularies."""
    rng = random.Random(seed)
    return [rng.randrange(3, min(vocab, 5000)) for _ in range(length)]


def run(nv, args, timeout=600):
    """Runs `nv args...`; raises RuntimeError with its stderr on failure."""
    p = subprocess.run([nv] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        shown = " ".join(a if len(a) <= 40 else a[:37] + "..." for a in map(str, args))
        raise RuntimeError(f"{os.path.basename(nv)} {shown}: exit {p.returncode}: "
                           f"{p.stderr.strip()[-1500:]}")
    return p.stdout


def logits(nv, model_dir, ids, device, extra=()):
    """[T, V] float32 logits of `nanovllm logits` at every prompt position."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.npy")
        run(nv, ["logits", "--device", device, "--model", model_dir,
                 "--prompt-ids", ",".join(map(str, ids)), "--out", out] + list(extra))
        return np.load(out)


def generate(nv, model_dir, prompts, device, max_tokens, extra=()):
    """Greedy `nanovllm generate --json --logprobs 2 --ignore-eos` of several prompts in one
    batch; returns the parsed JSON (outputs[i].token_ids, outputs[i].logprobs, stats...)."""
    args = ["generate", "--device", device, "--model", model_dir, "--max-tokens", max_tokens,
            "--temperature", 0, "--ignore-eos", "--logprobs", 2, "--json"]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    return json.loads(run(nv, args + list(extra)))


def find_keys(obj, keys):
    """{key: value} for each key at its shallowest occurrence in a nested JSON value
    (breadth-first: a top-level field wins over one inside a sub-object)."""
    found, level = {}, [obj]
    while level:
        nxt = []
        for o in level:
            items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
            for k, v in items:
                if isinstance(o, dict) and k in keys and k not in found:
                    found[k] = v
                nxt.append(v)
        level = nxt
    return found


def parse_args(many_models, gate=False, argv=None, cpu_args=False):
    """NANOVLLM_BIN, then one MODEL_DIR (a.model) or several (a.models), and --json-out; with
    gate=True also --gate PREFIX (repeatable, a.gate: which models decide pass/fail); with
    cpu_args=True also --cpu-arg ARG (repeatable, a.cpu_arg: extra CLI arguments of the CPU runs)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("nv", help="the nanovllm binary")
    if many_models:
        ap.add_argument("models", nargs="+")
    else:
        ap.add_argument("model")
    ap.add_argument("--json-out", required=True)
    if gate:
        ap.add_argument("--gate", action="append", default=[],
                        help="folder-name prefix of a model whose result decides pass/fail")
    if cpu_args:
        ap.add_argument("--cpu-arg", action="append", default=[],
                        help="an extra argument of the CPU backend's runs (e.g. --quantization=none)")
    return ap.parse_args(argv)


def for_each_model(models, check, report):
    """{model name: check(dir)} over the model folders; check returns a dict with "ok"; report(name,
    result) prints it. An exception fails that model only, so one failure hides no other."""
    results = {}
    for m in models:
        name = os.path.basename(os.path.normpath(m))
        try:
            r = check(m)
            report(name, r)
        except Exception as e:  # noqa: BLE001
            r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            print(f"{name}: FAIL: {r['error']}")
        results[name] = r
    return results


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
