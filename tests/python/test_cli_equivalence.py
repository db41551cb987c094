"""The Python API and the CLI (`nanovllm generate --json`) give the same outputs for the same
requests: text prompts, token-id prompts, chat prompts, greedy and seeded sampling, stop
strings and stop token ids."""
import json

import pytest

from conftest import run_cli
from nanovllm import LLM, SamplingParams

# (CLI sampling flags, the same SamplingParams)
SAMPLING = [
    (["--temperature", "0", "--max-tokens", "12"], dict(temperature=0.0, max_tokens=12)),
    (["--temperature", "0.6", "--top-p", "0.9", "--top-k", "50", "--seed", "7", "--max-tokens", "20"],
     dict(temperature=0.6, top_p=0.9, top_k=50, seed=7, max_tokens=20)),
    (["--temperature", "1.0", "--min-p", "0.05", "--seed", "3", "--max-tokens", "16",
      "--ignore-eos"], dict(temperature=1.0, min_p=0.05, seed=3, max_tokens=16, ignore_eos=True)),
    (["--temperature", "0.7", "--seed", "5", "--max-tokens", "16", "--presence-penalty", "0.5",
      "--frequency-penalty", "0.3", "--repetition-penalty", "1.3"],
     dict(temperature=0.7, seed=5, max_tokens=16, presence_penalty=0.5, frequency_penalty=0.3,
          repetition_penalty=1.3)),
]
TEXTS = ["Once upon a time", "The capital of France is", "def fib(n):"]
IDS = [[1, 2, 3, 4, 5], [9707, 1879, 0, 77091] * 5]


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=64, kvcache_block_size=16)


def cli_outputs(model, *args):
    out = run_cli("generate", "--model", model, "--json", "--num-kvcache-blocks", "64",
                  "--block-size", "16", *args)
    return json.loads(out.strip().splitlines()[-1])["outputs"]


def assert_same(py_outs, cli_outs):
    assert len(py_outs) == len(cli_outs)
    for i, (p, c) in enumerate(zip(py_outs, cli_outs)):
        for key in ("text", "token_ids", "finish_reason"):  # (cache hits differ: llm is reused)
            assert p[key] == c[key], f"output {i} {key}: python {p[key]!r} vs cli {c[key]!r}"
        assert len(p["prompt_token_ids"]) == c["num_prompt_tokens"]


@pytest.mark.parametrize("flags,kwargs", SAMPLING, ids=["greedy", "top_p_seeded", "min_p_ignore_eos", "penalties"])
def test_text_and_id_prompts_match_cli(tiny_model, llm, flags, kwargs):
    cli_args = [a for t in TEXTS for a in ("--prompt", t)]
    cli_args += [a for ids in IDS for a in ("--prompt-ids", ",".join(map(str, ids)))]
    cli = cli_outputs(tiny_model, *cli_args, *flags)
    py = llm.generate(TEXTS + IDS, SamplingParams(**kwargs), use_tqdm=False)
    assert_same(py, cli)


def test_chat_prompts_match_cli(tiny_model, llm):
    questions = ["introduce yourself", "list all prime numbers within 100"]
    cli = cli_outputs(tiny_model, *[a for q in questions for a in ("--prompt", q)], "--chat",
                      "--enable-thinking", "false", "--temperature", "0.6", "--seed", "11",
                      "--max-tokens", "24")
    tok = llm.get_tokenizer()
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
               for q in questions]
    py = llm.generate(prompts, SamplingParams(temperature=0.6, seed=11, max_tokens=24),
                      use_tqdm=False)
    assert_same(py, cli)


def test_stops_match_cli(tiny_model, llm):
    # Greedy output of the first prompt, to pick a stop string and a stop token that occur.
    probe = llm.generate([TEXTS[0]], SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)[0]
    stop_token = probe["token_ids"][3]
    stop_text = probe["text"][len(probe["text"]) // 2:][:3] or "x"
    cli = cli_outputs(tiny_model, "--prompt", TEXTS[0], "--prompt", TEXTS[1], "--temperature", "0",
                      "--max-tokens", "12", "--stop", stop_text, "--stop-token-ids", str(stop_token))
    py = llm.generate(TEXTS[:2], SamplingParams(temperature=0, max_tokens=12, stop=[stop_text],
                                                stop_token_ids=[stop_token]), use_tqdm=False)
    assert_same(py, cli)
    assert py[0]["finish_reason"] == "stop" and len(py[0]["token_ids"]) < 12


def test_penalties_and_logit_bias_act(llm):
    # The random model repeats one token greedily; a repetition penalty must break the run, and
    # a +100 logit bias must force its token at every step.
    plain = llm.generate([TEXTS[0]], SamplingParams(temperature=0, max_tokens=12), use_tqdm=False)[0]
    assert len(set(plain["token_ids"])) < 12
    penalized = llm.generate([TEXTS[0]], SamplingParams(temperature=0, max_tokens=12,
                                                        repetition_penalty=5.0), use_tqdm=False)[0]
    assert len(set(penalized["token_ids"])) > len(set(plain["token_ids"]))
    forced = llm.generate([TEXTS[0]], SamplingParams(temperature=0, max_tokens=6,
                                                     logit_bias={9707: 100.0}), use_tqdm=False)[0]
    assert plain["token_ids"][0] != 9707 and forced["token_ids"] == [9707] * 6
    assert forced["text"] == "Hello" * 6
