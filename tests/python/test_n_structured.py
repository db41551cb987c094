"""SamplingParams.n and .structured_outputs through the Python package: generate() returns the n
completions of each prompt under "outputs", stream() tells them apart by "completion", step()
reports each as it finishes, aborting mid-way leaves the engine clean; constraints (JSON schema
as a dict, regex, choice) shape the text; bad values are TypeError / ValueError."""
import json
import re

import pytest

from nanovllm import LLM, SamplingParams, StructuredOutputsParams

PROMPT = [1000 + 37 * i for i in range(40)]


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=64, kvcache_block_size=16, max_model_len=256,
               max_num_batched_tokens=512)


def sampled(n, seed=1234, max_tokens=8):
    # temperature 50: the random model is peaked; flattened, completions can differ.
    return SamplingParams(temperature=50.0, max_tokens=max_tokens, ignore_eos=True, seed=seed, n=n)


def test_n_completions_generate(llm):
    one = llm.generate([PROMPT], sampled(1), use_tqdm=False)[0]
    assert "outputs" not in one  # n = 1 keeps nano-vLLM's dict
    out = llm.generate([PROMPT, PROMPT[:20]], sampled(3), use_tqdm=False)
    assert len(out) == 2
    for r in out:
        outs = r["outputs"]
        assert [o["index"] for o in outs] == [0, 1, 2]
        assert all(len(o["token_ids"]) == 8 and o["finish_reason"] == "length" for o in outs)
        assert (r["text"], r["token_ids"]) == (outs[0]["text"], outs[0]["token_ids"])
    # Completion 0 samples with the request's own seed: it is the n = 1 answer.
    assert out[0]["token_ids"] == one["token_ids"]
    assert len({tuple(o["token_ids"]) for o in out[0]["outputs"]}) > 1
    # Reproducible as a set.
    again = llm.generate([PROMPT], sampled(3), use_tqdm=False)[0]
    assert [o["token_ids"] for o in again["outputs"]] == [o["token_ids"] for o in out[0]["outputs"]]
    assert llm.is_finished() and llm.stats().num_blocks_used == 0


def test_n_completions_stream(llm):
    want = llm.generate([PROMPT, PROMPT[:25]], sampled(2), use_tqdm=False)
    got, finished = {}, {}
    for piece in llm.stream([PROMPT, PROMPT[:25]], sampled(2)):
        key = (piece["index"], piece["completion"])
        got.setdefault(key, []).extend(piece["token_ids"])
        finished[key] = finished.get(key, 0) + int(piece["finished"])
    assert sorted(got) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(v == 1 for v in finished.values())  # one last piece per completion
    for (i, k), ids in got.items():
        assert ids == want[i]["outputs"][k]["token_ids"]
    assert llm.is_finished()


def test_n_abort_midway_leaves_engine_clean(llm):
    gen = llm.stream([PROMPT], sampled(4, max_tokens=40))
    next(gen)
    gen.close()  # aborts all 4 completions
    assert llm.is_finished() and llm.stats().num_running == 0
    # Nothing stale is handed to the next call: same answer as on a fresh request.
    a = llm.generate([PROMPT], sampled(2), use_tqdm=False)[0]
    b = llm.generate([PROMPT], sampled(2), use_tqdm=False)[0]
    assert a == b and len(a["outputs"]) == 2


def test_n_completions_step_api(llm):
    rid = llm.add_request(PROMPT, sampled(3))
    done = []
    for _ in range(100):
        outs, _ = llm.step()
        done += outs
        if llm.is_finished():
            break
    assert [r for r, _ in done] == [rid] * 3
    assert all(len(ids) == 8 for _, ids in done)


def test_structured_outputs(llm):
    # Bounded integer: the random model, left alone, writes digits until max_tokens.
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "b": {"type": "boolean"}},
              "required": ["a", "b"], "additionalProperties": False}
    cases = [
        (StructuredOutputsParams(json=schema), lambda t: set(json.loads(t)) == {"a", "b"}),
        ({"regex": "[0-9]{3}"}, lambda t: re.fullmatch("[0-9]{3}", t)),
        (StructuredOutputsParams(choice=["yes", "no"]), lambda t: t in ("yes", "no")),
    ]
    for so, ok in cases:
        sp = SamplingParams(temperature=1.0, max_tokens=200, seed=7, structured_outputs=so, n=2)
        r = llm.generate([PROMPT], sp, use_tqdm=False)[0]
        for o in r["outputs"]:
            assert o["finish_reason"] == "stop", (so, o)
            assert ok(o["text"]), (so, o["text"])
    # Read back: the schema as JSON text, in its key order.
    sp = SamplingParams(structured_outputs={"json": schema})
    assert json.loads(sp.structured_outputs.json) == schema
    assert SamplingParams().structured_outputs is None


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(n=0), ValueError, r"n must be in \[1, 64\], got 0"),
    (dict(n=65), ValueError, r"n must be in \[1, 64\], got 65"),
    (dict(n="2"), TypeError, r"SamplingParams\.n must be an int, got str"),
    (dict(structured_outputs=5), TypeError, r"structured_outputs must be a StructuredOutputsParams"),
    (dict(structured_outputs={"regexp": "a"}), TypeError, r"unexpected keyword argument 'regexp'"),
    (dict(structured_outputs={"regex": "a", "choice": ["b"]}), ValueError, r"give only one of"),
    (dict(structured_outputs={"json": 3}), TypeError, r"StructuredOutputsParams\.json must be a str"),
])
def test_param_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SamplingParams(**kwargs)


def test_unsupported_schema_is_value_error(llm):
    sp = SamplingParams(max_tokens=8, structured_outputs={"json": {"type": "string", "patternProperties": {}}})
    with pytest.raises(ValueError, match=r"prompts\[0\]: .*unsupported keyword 'patternProperties'"):
        llm.generate([PROMPT], sp, use_tqdm=False)
    assert llm.is_finished()
