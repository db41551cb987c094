"""GPU machine: decode through CUDA graphs (the default) against --enforce-eager on the same
model and prompts, by the greedy rule of logits_compare.py: 8 prompts x 64 greedy tokens in one
batch, equal up to a divergence at a near tie of the eager run (top-2 logprob margin <= 0.05
nats: both runs use the same kernels and precision, so only summation orders may differ).
The engines' own report must show graphs in the default run and none in the eager one (the
`executor` / `graph_pool_bytes` fields of the --json output, when the engine provides them).

    eager_vs_graph.py NANOVLLM_BIN --json-out FILE MODEL_DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logits_compare as lc  # noqa: E402
import nv_cli  # noqa: E402

TIE_EPS = 0.05


def main():
    a = nv_cli.parse_args(many_models=False)
    vocab = nv_cli.model_config(a.model)["vocab_size"]
    prompts = [nv_cli.random_prompt(vocab, 3 + 9 * i, seed=30 + i) for i in range(8)]
    graph = nv_cli.generate(a.nv, a.model, prompts, "cuda", 64)
    eager = nv_cli.generate(a.nv, a.model, prompts, "cuda", 64, ["--enforce-eager"])
    res = lc.compare_greedy(eager["outputs"], graph["outputs"], TIE_EPS)
    keys = ("executor", "graph_pool_bytes")
    res["graph_run"] = nv_cli.find_keys(graph, keys)
    res["eager_run"] = nv_cli.find_keys(eager, keys)
    problems = []
    if "executor" not in res["graph_run"]:
        problems.append("the --json output has no 'executor' field: cannot tell whether graphs ran")
    elif "graph" not in str(res["graph_run"]["executor"]).lower():
        problems.append(f"default run used executor {res['graph_run']['executor']!r}, not graphs")
    if "executor" in res["eager_run"] and "graph" in str(res["eager_run"]["executor"]).lower():
        problems.append(f"--enforce-eager run used executor {res['eager_run']['executor']!r}")
    # Largest |logprob difference| of the chosen token before any divergence.
    dmax = 0.0
    for e, g, s in zip(eager["outputs"], graph["outputs"], res["sequences"]):
        for i in range(s["same_prefix"]):
            dmax = max(dmax, abs(e["logprobs"][i]["logprob"] - g["logprobs"][i]["logprob"]))
    res["max_chosen_logprob_diff"] = dmax
    res["problems"] = problems
    res["ok"] = res["ok"] and not problems
    print(lc.summary_line("graph vs eager greedy", res))
    print(f"executor: default {res['graph_run']}, eager {res['eager_run']}; "
          f"max |d logprob| before divergence {dmax:.3g}")
    for p in problems:
        print("FAIL:", p)
    nv_cli.write_json(a.json_out, res)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
