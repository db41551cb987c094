"""LLM(model, trace_path=...): the Python API writes the same trace as `--trace`; the file is
complete once the engine is freed, and its step and token counts equal llm.stats() and the
outputs."""
import gc
import json

import pytest

from nanovllm import LLM, NanoVLLMError, SamplingParams


def test_trace_path_writes_a_closed_trace(tiny_model, tmp_path):
    path = tmp_path / "trace.json"
    llm = LLM(tiny_model, trace_path=str(path), num_kvcache_blocks=64, kvcache_block_size=16)
    outs = llm.generate([[1, 2, 3, 4], "Once upon a time"], SamplingParams(temperature=0, max_tokens=5),
                        use_tqdm=False)
    steps = llm.stats().steps
    del llm
    gc.collect()
    events = json.loads(path.read_text())  # a complete JSON array: closed at engine destruction
    step_events = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert len(step_events) == steps
    sampled = sum(1 for e in step_events for s in e["args"]["seqs"] if s.get("sample", True))
    assert sampled == sum(len(o["token_ids"]) for o in outs)
    ends = [e for e in events if e["ph"] == "e" and e["name"].startswith("request ")]
    assert sorted(e["args"]["output_tokens"] for e in ends) == [5, 5]
    assert any(e["name"] == "engine_stats" for e in events)


def test_unwritable_trace_path_is_an_error(tiny_model):
    with pytest.raises(NanoVLLMError, match="cannot open trace file"):
        LLM(tiny_model, trace_path="/nonexistent-dir/trace.json")
