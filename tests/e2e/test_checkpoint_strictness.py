"""Issue 28, loader strictness: every tensor of a checkpoint is used by the model or deliberately
ignored (a rotary inv_freq cache; lm_head.weight when the embeddings are tied). Anything else is
an error naming the tensor, like a missing tensor or one of the wrong shape: never a silent run,
never a crash.

Each case edits a random tiny Qwen3 checkpoint (`make-model`) and runs `nanovllm generate`."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import e2e_util as U  # noqa: E402

import subprocess  # noqa: E402


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_st(path, header, data):
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + data)


def edit(model_dir, add=(), drop=(), reshape=None):
    """add: [(name, shape)] f32 zeros appended; drop: names removed from the header (their bytes
    stay); reshape: (name, new shape) with the same element count."""
    path = os.path.join(model_dir, "model.safetensors")
    header, data = read_st(path)
    for name in drop:
        del header[name]
    if reshape:
        name, shape = reshape
        header[name]["shape"] = shape
    for name, shape in add:
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data), len(data) + n]}
        data += b"\0" * n
    write_st(path, header, data)


def generate(model_dir):
    return subprocess.run([U.nanovllm_bin(), "generate", "--model", model_dir, "--prompt-ids", "1,2,3",
                           "--max-tokens", "2", "--threads", "1", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)


def fresh(tmp, name, extra=()):
    d = os.path.join(tmp, name)
    U.run_cli(["make-model", "--arch", "qwen3", "--preset", "tiny", "--dtype", "f32", "--seed", "3", "--out", d]
              + list(extra))
    return d


def expect_error(r, *needles):
    if r.returncode != 1 or any(n not in r.stderr for n in needles):
        raise AssertionError(f"exit {r.returncode}, stderr {r.stderr[-800:]!r}; expected {needles}")
    if ".cc:" in r.stderr:
        raise AssertionError(f"a source path in a user error: {r.stderr[-400:]!r}")


def case_unused_tensor(tmp):
    d = fresh(tmp, "extra")
    edit(d, add=[("model.layers.0.mlp.extra_proj.weight", (4, 4))])
    expect_error(generate(d), "'model.layers.0.mlp.extra_proj.weight'", "does not use")


def case_bias_config_mismatch(tmp):
    # The silent bug: a checkpoint with o_proj biases whose config says attention_bias false.
    d = fresh(tmp, "bias", ("--attention-bias",))
    cfg_path = os.path.join(d, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["attention_bias"] = False
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    expect_error(generate(d), "self_attn.o_proj.bias'", "attention_bias")


def case_ignored_tensors_pass(tmp):
    d = fresh(tmp, "ignored")
    edit(d, add=[("model.rotary_emb.inv_freq", (8,)), ("model.layers.1.self_attn.rotary_emb.inv_freq", (8,)),
                 ("lm_head.weight", (151936, 64))])  # tied: transformers ignores it too
    r = generate(d)
    if r.returncode != 0:
        raise AssertionError(f"ignored tensors refused: {r.stderr[-800:]}")


def case_missing_and_misshapen(tmp):
    d = fresh(tmp, "missing")
    edit(d, drop=["model.layers.1.post_attention_layernorm.weight"])
    expect_error(generate(d), "missing tensor 'model.layers.1.post_attention_layernorm.weight'")
    d = fresh(tmp, "shape")
    edit(d, reshape=("model.layers.0.mlp.down_proj.weight", [192, 64]))
    expect_error(generate(d), "'model.layers.0.mlp.down_proj.weight' has shape [192, 64], expected [64, 192]")


def main():
    run = U.Runner()
    tmp = U.make_tmpdir("strict-")
    try:
        run.case("an unused tensor is an error naming it", case_unused_tensor, tmp)
        run.case("o_proj.bias with attention_bias false: an error, not a silent run", case_bias_config_mismatch, tmp)
        run.case("rotary caches and a tied lm_head are ignored", case_ignored_tensors_pass, tmp)
        run.case("missing / misshapen tensors: errors naming them", case_missing_and_misshapen, tmp)
    finally:
        U.remove_tree(tmp)
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
