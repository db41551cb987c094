"""GPU machine: nanovllm against transformers on the same GPU and the same safetensors, by the
rules of logits_compare.py (transformers is the reference).

Per model: transformers' logits at every position of a 64-token prompt (in the checkpoint's
dtype: bf16 models run in bf16, f32 models in f32, on CUDA) against `nanovllm logits` on
--device cuda (rel tol 2e-2) and on --device cpu (2e-2 for bf16 checkpoints, where transformers
itself computes in bf16; 1e-3 for f32); then 32 greedy tokens of 4 prompts, transformers'
generate() against `nanovllm generate --device cuda` (equal up to a divergence at a near tie of
transformers' logits). tie_eps = 1e-2 x max |reference logit| of the prompt.

    hf_compare.py NANOVLLM_BIN --json-out FILE MODEL_DIR...
"""
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GenerationConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logits_compare as lc  # noqa: E402
import nv_cli  # noqa: E402


def load_hf(model_dir, dtype):
    try:
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    except TypeError:  # transformers < 4.56 spells it torch_dtype
        m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype)
    return m.to("cuda").eval()


def hf_greedy(model, prompt, n):
    """n greedy tokens and, per step, the top-2 log-probabilities in nanovllm's JSON shape."""
    # No EOS at all (like --ignore-eos): min_new_tokens would mask EOS instead, which nanovllm
    # does not do, and make a non-tie divergence wherever EOS is the argmax.
    gc = GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0,
                          output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt], device="cuda"), generation_config=gc)
    tokens = out.sequences[0, len(prompt):].tolist()
    logprobs = []
    for s in out.scores:  # processed logits of each step [1, V]
        lp = torch.log_softmax(s[0].float(), dim=-1)
        v, i = torch.topk(lp, 2)
        logprobs.append({"top": [{"token_id": int(i[k]), "logprob": float(v[k])} for k in range(2)]})
    return {"token_ids": tokens, "logprobs": logprobs}


def check_model(nv, model_dir):
    cfg = nv_cli.model_config(model_dir)
    bf16 = str(cfg.get("torch_dtype", cfg.get("dtype", "float32"))) == "bfloat16"
    model = load_hf(model_dir, torch.bfloat16 if bf16 else torch.float32)
    vocab = cfg["vocab_size"]
    ids = nv_cli.random_prompt(vocab, 64, seed=2)
    with torch.no_grad():
        ref = model(torch.tensor([ids], device="cuda")).logits[0].float().cpu().numpy()
    res = {"hf_dtype": "bf16" if bf16 else "f32",
           "hf_attn": getattr(model.config, "_attn_implementation", "?")}
    res["cuda_logits"] = lc.compare_logits(nv_cli.logits(nv, model_dir, ids, "cuda"), ref, 2e-2)
    res["cpu_logits"] = lc.compare_logits(nv_cli.logits(nv, model_dir, ids, "cpu"), ref,
                                          2e-2 if bf16 else 1e-3)
    eps = 1e-2 * float(np.abs(ref).max())
    prompts = [nv_cli.random_prompt(vocab, n, seed=20 + n) for n in (5, 17, 40, 64)]
    hf = [hf_greedy(model, p, 32) for p in prompts]
    nvg = nv_cli.generate(nv, model_dir, prompts, "cuda", 32)
    res["greedy"] = lc.compare_greedy(hf, nvg["outputs"], eps)
    res["ok"] = all(res[k]["ok"] for k in ("cuda_logits", "cpu_logits", "greedy"))
    del model
    torch.cuda.empty_cache()
    return res


def main():
    a = nv_cli.parse_args(many_models=True)
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}")

    def report(name, r):
        for k in ("cuda_logits", "cpu_logits", "greedy"):
            print(lc.summary_line(f"{name} {k} vs transformers ({r['hf_dtype']})", r[k]))

    results = nv_cli.for_each_model(a.models, lambda m: check_model(a.nv, m), report)
    ok = all(r["ok"] for r in results.values())
    nv_cli.write_json(a.json_out, {"ok": ok, "transformers": transformers.__version__,
                                   "models": results})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
