"""GPU machine: nanovllm's CPU backend (f32 activations) against its CUDA backend (bf16) on the
same weights, by the rules of logits_compare.py.

Per model: logits at every position of a 64-token prompt (rel err <= 2e-2, top-1 with near
ties), then 4 prompts x 32 greedy tokens generated in one batch on each backend (equal up to a
divergence at a near tie of the CPU run). tie_eps = 1e-2 x max |CPU logit| of the prompt.

Pass/fail comes from the GATE models only (default: those whose folder name starts with
"stories260K": real weights, logits with real margins). Random models (the Qwen3-0.6B shape) have
nearly flat logits, where bf16 rounding flips many near ties: their agreement is reported as a
figure (top-1 agreement, identical sequences) and never fails the step.

    cpu_vs_cuda.py NANOVLLM_BIN --json-out FILE [--gate PREFIX]... [--cpu-arg ARG]... MODEL...
MODEL: a model folder or a .gguf file.
Exit 0 when every gate model passes, 1 when one fails, 77 (skip) when no gate model was given.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logits_compare as lc  # noqa: E402
import nv_cli  # noqa: E402


def check_model(nv, model, test_device="cuda", cpu_extra=()):
    """test_device "cpu" compares the CPU backend with itself (the CPU machine's self-test).
    cpu_extra: extra arguments of the CPU runs (a GGUF's exact dequantization: --quantization=none)."""
    vocab = nv_cli.model_config(model, nv)["vocab_size"]
    ids = nv_cli.random_prompt(vocab, 64, seed=1)
    cpu = nv_cli.logits(nv, model, ids, "cpu", cpu_extra)
    cuda = nv_cli.logits(nv, model, ids, test_device)
    res = {"logits": lc.compare_logits(cuda, cpu, rel_tol=2e-2, tie_frac=1e-2)}
    eps = res["logits"].get("tie_eps", 0.0)
    prompts = [nv_cli.random_prompt(vocab, n, seed=10 + n) for n in (5, 17, 40, 64)]
    g_cpu = nv_cli.generate(nv, model, prompts, "cpu", 32, cpu_extra)
    g_cuda = nv_cli.generate(nv, model, prompts, test_device, 32)
    res["greedy"] = lc.compare_greedy(g_cpu["outputs"], g_cuda["outputs"], eps)
    res["ok"] = res["logits"]["ok"] and res["greedy"]["ok"]
    return res


def is_gate(name, prefixes):
    return any(name.startswith(p) for p in prefixes)


def main():
    a = nv_cli.parse_args(many_models=True, gate=True, cpu_args=True)
    gates = a.gate or ["stories260K"]

    def report(name, r):
        role = "GATE" if is_gate(name, gates) else "figure"
        print(lc.summary_line(f"[{role}] {name} logits cpu vs cuda", r["logits"]))
        print(lc.summary_line(f"[{role}] {name} greedy cpu vs cuda", r["greedy"]))

    results = nv_cli.for_each_model(a.models, lambda m: check_model(a.nv, m, cpu_extra=a.cpu_arg), report)
    verdict = decide(results, gates)
    nv_cli.write_json(a.json_out, verdict)
    if not verdict["gates"]:
        print(f"SKIP: no gate model (folder names starting with {gates}) among {list(results)}")
        return 77
    return 0 if verdict["ok"] else 1


def decide(results, gates):
    """{ok, gates, models}: marks each model's result with "gate"; ok iff there is a gate model
    and every gate model passed (figure models never fail the step)."""
    gate_names = [n for n in results if is_gate(n, gates)]
    for n, r in results.items():
        r["gate"] = n in gate_names
    ok = bool(gate_names) and all(results[n]["ok"] for n in gate_names)
    return {"ok": ok, "gates": gate_names, "models": results}


if __name__ == "__main__":
    sys.exit(main())
