"""GPU machine: transformers' own continuous batching (paged attention) on nano-vLLM's bench.py
workload (bench_workload.py: 256 sequences, 142,827 prompt / 133,966 output tokens), on the same
weights as `nanovllm bench`, for the side-by-side row of issue 13.

Sampling as bench.py: temperature 0.6 (no top-k / top-p), no EOS stop, per-sequence max_tokens.
Requests go through the ContinuousBatchingManager (what generate_batch() drives) so that each
keeps its own max_new_tokens; if this transformers has no such manager API, generate_batch() runs
with one max_new_tokens (the workload's mean) for all, and the JSON says so. The timer starts
after the manager's warm-up (CUDA-graph capture), as `nanovllm bench` excludes its start-up.
At the wall-clock time --stop-at (Unix seconds) the run stops and reports the requests finished
by then (partial: true).

    hf_bench.py MODEL_DIR --json-out FILE [--stop-at T] [--num-seqs N]
"""
import argparse
import inspect
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_workload  # noqa: E402


def call(fn, **kwargs):
    """fn(**kwargs) with only the keyword arguments fn accepts (the API moves between versions)."""
    params = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return fn(**kwargs)
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def n_tokens(result):
    return len(getattr(result, "generated_tokens", None) or [])


def workload_hints(prompts, max_tokens):
    """The sizing hints generate_batch() gives the manager (cache and batch sizes), where this
    transformers has them."""
    try:
        from transformers.generation.continuous_batching.utils import WorkloadHints
        return call(WorkloadHints, max_prompt_length=max(map(len, prompts)),
                    max_generated_length=max(max_tokens), num_requests=len(prompts))
    except (ImportError, TypeError):
        return None


def run_manager(model, gc, prompts, max_tokens, stop_at):
    res = {"api": "ContinuousBatchingManager.add_request (per-request max_new_tokens)"}
    t_setup = time.time()
    with call(model.continuous_batching_context_manager, generation_config=gc, block=True,
              timeout=5, warmup=True, workload_hints=workload_hints(prompts, max_tokens)) as mgr:
        res["setup_seconds"] = time.time() - t_setup
        t0 = time.time()
        for i, (p, m) in enumerate(zip(prompts, max_tokens)):
            call(mgr.add_request, input_ids=p, request_id=f"r{i}", max_new_tokens=m)
        done, tokens = set(), 0
        while len(done) < len(prompts) and time.time() < stop_at:
            r = mgr.get_result(timeout=1)
            if r is not None and r.is_finished() and r.request_id not in done:
                done.add(r.request_id)
                tokens += n_tokens(r)
        res["seconds"] = time.time() - t0
    res.update(finished=len(done), output_tokens=tokens, partial=len(done) < len(prompts))
    return res


def run_generate_batch(model, gc, prompts, max_tokens, stop_at):
    gc.max_new_tokens = round(sum(max_tokens) / len(max_tokens))
    res = {"api": f"generate_batch (uniform max_new_tokens={gc.max_new_tokens}: fallback)"}
    t0 = time.time()
    out = call(model.generate_batch, inputs=prompts, generation_config=gc, progress_bar=False)
    res["seconds"] = time.time() - t0
    res.update(finished=len(out), output_tokens=sum(n_tokens(r) for r in out.values()),
               partial=len(out) < len(prompts))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--json-out", required=True)
    ap.add_argument("--stop-at", type=float, default=time.time() + 300)
    ap.add_argument("--num-seqs", type=int, default=256)
    a = ap.parse_args()
    import transformers
    prompts, max_tokens = bench_workload.make_workload(num_seqs=a.num_seqs)
    res = {"engine": f"transformers {transformers.__version__}", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "num_seqs": len(prompts),
           "prompt_tokens": sum(map(len, prompts)), "expected_output_tokens": sum(max_tokens)}
    try:
        dtype = torch.bfloat16
        try:
            model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype)
        except TypeError:
            model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=dtype)
        model = model.to("cuda").eval()
        gc = GenerationConfig(do_sample=True, temperature=0.6, top_k=0, top_p=1.0,
                              max_new_tokens=max(max_tokens), eos_token_id=None, pad_token_id=0)
        if hasattr(model, "continuous_batching_context_manager"):
            res.update(run_manager(model, gc, prompts, max_tokens, a.stop_at))
        else:
            res.update(run_generate_batch(model, gc, prompts, max_tokens, a.stop_at))
        res["output_tokens_per_s"] = res["output_tokens"] / res["seconds"]
        res["attn_implementation"] = getattr(model.config, "_attn_implementation", "?")
        res["ok"] = not res["partial"]
    except Exception as e:  # noqa: BLE001 (record the failure in the summary)
        res.update(ok=False, error=f"{type(e).__name__}: {e}")
    print(json.dumps(res))
    with open(a.json_out, "w") as f:
        json.dump(res, f, indent=1)
    sys.stdout.flush()
    # The manager's thread may still run after a deadline; leave without waiting for it.
    os._exit(0 if res.get("ok") else 1)


if __name__ == "__main__":
    main()
