"""GPU machine: nanovllm's CPU backend (f32 activations) against its CUDA backend (bf16) on the
same weights, by the rules of logits_compare.py.

Per model: logits at every position of a 64-token prompt (rel err <= 2e-2, top-1 with near
ties), then 4 prompts x 32 greedy tokens generated in one batch on each backend (equal up to a
divergence at a near tie of the CPU run). tie_eps = 1e-2 x max |CPU logit| of the prompt.

    cpu_vs_cuda.py NANOVLLM_BIN --json-out FILE MODEL_DIR...
Exit 0 when every model passes, 1 otherwise.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logits_compare as lc  # noqa: E402
import nv_cli  # noqa: E402


def check_model(nv, model, test_device="cuda"):
    """test_device "cpu" compares the CPU backend with itself (the CPU machine's self-test)."""
    vocab = nv_cli.model_config(model)["vocab_size"]
    ids = nv_cli.random_prompt(vocab, 64, seed=1)
    cpu = nv_cli.logits(nv, model, ids, "cpu")
    cuda = nv_cli.logits(nv, model, ids, test_device)
    res = {"logits": lc.compare_logits(cuda, cpu, rel_tol=2e-2, tie_frac=1e-2)}
    eps = res["logits"].get("tie_eps", 0.0)
    prompts = [nv_cli.random_prompt(vocab, n, seed=10 + n) for n in (5, 17, 40, 64)]
    g_cpu = nv_cli.generate(nv, model, prompts, "cpu", 32)
    g_cuda = nv_cli.generate(nv, model, prompts, test_device, 32)
    res["greedy"] = lc.compare_greedy(g_cpu["outputs"], g_cuda["outputs"], eps)
    res["ok"] = res["logits"]["ok"] and res["greedy"]["ok"]
    return res


def main():
    a = nv_cli.parse_args(many_models=True)

    def report(name, r):
        print(lc.summary_line(f"{name} logits cpu vs cuda", r["logits"]))
        print(lc.summary_line(f"{name} greedy cpu vs cuda", r["greedy"]))

    results = nv_cli.for_each_model(a.models, lambda m: check_model(a.nv, m), report)
    ok = all(r["ok"] for r in results.values())
    nv_cli.write_json(a.json_out, {"ok": ok, "models": results})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
