"""nano-vLLM's example.py flow on a random Qwen3 model: a transformers-style tokenizer renders two
chat prompts, LLM(path, enforce_eager=True, tensor_parallel_size=1) generates them with
SamplingParams(temperature=0.6, max_tokens=256), and the script prints each output's "text".

Debian has no transformers, so a stand-in module named `transformers` exposes nanovllm's
AutoTokenizer; the flow itself is written as a user of nano-vLLM writes it."""
import json
import os
import sys
import types

import pytest

import nanovllm


def user_script(path):
    """What a nano-vLLM user runs (the model path is the only difference)."""
    from transformers import AutoTokenizer

    from nanovllm import LLM, SamplingParams

    tokenizer = AutoTokenizer.from_pretrained(path)
    llm = LLM(path, enforce_eager=True, tensor_parallel_size=1)
    sampling_params = SamplingParams(temperature=0.6, max_tokens=256)
    questions = ["introduce yourself", "list all prime numbers within 100"]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                             add_generation_prompt=True)
               for q in questions]
    outputs = llm.generate(prompts, sampling_params)
    for prompt, output in zip(prompts, outputs):
        print(f"\nPrompt: {prompt!r}\nCompletion: {output['text']!r}")
    return prompts, outputs, llm


@pytest.fixture
def fake_transformers(monkeypatch):
    mod = types.ModuleType("transformers")
    mod.AutoTokenizer = nanovllm.AutoTokenizer
    monkeypatch.setitem(sys.modules, "transformers", mod)


def test_example_flow(tiny_model, fake_transformers, capsys):
    prompts, outputs, llm = user_script(tiny_model)
    # Qwen3's chat format (the template's default: thinking enabled, so no empty think block).
    assert prompts[0] == "<|im_start|>user\nintroduce yourself<|im_end|>\n<|im_start|>assistant\n"
    assert prompts[1].startswith("<|im_start|>user\nlist all prime numbers within 100<|im_end|>")
    assert len(outputs) == 2
    tok = llm.get_tokenizer()
    with open(os.path.join(tiny_model, "generation_config.json")) as f:
        eos_ids = json.load(f)["eos_token_id"]
    for prompt, out in zip(prompts, outputs):
        assert isinstance(out["text"], str) and isinstance(out["token_ids"], list)
        assert 1 <= len(out["token_ids"]) <= 256
        assert all(isinstance(t, int) for t in out["token_ids"])
        # Length-limited, or stopped at Qwen3's end-of-turn token.
        if out["finish_reason"] == "length":
            assert len(out["token_ids"]) == 256
        else:
            assert out["finish_reason"] == "stop"
            assert out["token_ids"][-1] in eos_ids, out["token_ids"][-1]
        # The incrementally detokenized text equals a one-shot decode (special tokens skipped).
        assert out["text"] == tok.decode(out["token_ids"], skip_special_tokens=True)
        assert out["prompt_token_ids"] == tok.encode(prompt)
    printed = capsys.readouterr().out
    assert printed.count("Completion: ") == 2
    assert repr(outputs[0]["text"]) in printed
