"""Bad arguments raise the right exception with a clear message, and leave the engine usable:
wrong types are TypeError, bad values ValueError, engine failures NanoVLLMError (RuntimeError)
carrying the C++ message. Unknown LLM(**kwargs) are ignored, as nano-vLLM ignores them."""
import pytest

import nanovllm
from nanovllm import LLM, Config, NanoVLLMError, SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, num_kvcache_blocks=16, kvcache_block_size=16, max_model_len=128,
               max_num_batched_tokens=256)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(temperature="hot"), TypeError, r"SamplingParams\.temperature must be a number, got str"),
    (dict(max_tokens=1.5), TypeError, r"SamplingParams\.max_tokens must be an int, got float"),
    (dict(ignore_eos="yes"), TypeError, r"SamplingParams\.ignore_eos must be a bool"),
    (dict(stop=[1]), TypeError, r"SamplingParams\.stop must be a str or a list of str"),
    (dict(stop_token_ids=5), TypeError, r"SamplingParams\.stop_token_ids must be a list of ints"),
    (dict(seed="1"), TypeError, r"SamplingParams\.seed must be None or an int"),
    (dict(temprature=0.5), TypeError, r"unexpected keyword argument 'temprature'"),
    (dict(max_tokens=0), ValueError, r"max_tokens must be >= 1, got 0"),
    (dict(temperature=-1.0), ValueError, r"temperature must be finite and >= 0"),
    (dict(top_p=0.0), ValueError, r"top_p must be in \(0, 1\]"),
    (dict(min_tokens=9, max_tokens=4), ValueError, r"min_tokens must be in \[0, max_tokens=4\]"),
    (dict(seed=-1), ValueError, r"SamplingParams\.seed must be in \[0, 2\*\*64\)"),
    (dict(max_tokens=2**40), ValueError, r"out of range for a 32-bit int"),
    (dict(presence_penalty=3.0), ValueError, r"presence_penalty must be in \[-2, 2\], got 3"),
    (dict(frequency_penalty=-2.5), ValueError, r"frequency_penalty must be in \[-2, 2\]"),
    (dict(repetition_penalty=0.0), ValueError, r"repetition_penalty must be finite and > 0"),
    (dict(logit_bias={5: 200.0}), ValueError, r"logit_bias values must be in \[-100, 100\]"),
    (dict(logit_bias={-1: 1.0}), ValueError, r"logit_bias token ids must be >= 0"),
    (dict(logit_bias={"5": 1.0}), TypeError, r"SamplingParams\.logit_bias must be a dict with int token ids"),
    (dict(logit_bias=[(5, 1.0)]), TypeError, r"SamplingParams\.logit_bias must be a dict"),
])
def test_sampling_params_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SamplingParams(**kwargs)


def test_sampling_params_api():
    sp = SamplingParams(0.6, 256)  # nano-vLLM's positional order
    assert (sp.temperature, sp.max_tokens, sp.ignore_eos) == (0.6, 256, False)
    assert SamplingParams(stop="###").stop == ["###"]
    assert SamplingParams(seed=2**64 - 1).seed == 2**64 - 1
    assert SamplingParams(logit_bias={7: -0.5}).logit_bias == {7: -0.5}
    assert sp == SamplingParams(temperature=0.6, max_tokens=256) != SamplingParams()
    assert "temperature=0.6" in repr(sp)
    with pytest.raises(TypeError, match=r"SamplingParams\.top_k must be an int, got str"):
        sp.top_k = "5"
    with pytest.raises(TypeError, match="at most"):
        SamplingParams(*range(40))  # more positionals than fields


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(max_num_seqs="8"), TypeError, r"Config\.max_num_seqs must be an int, got str"),
    (dict(enforce_eager=1), TypeError, r"Config\.enforce_eager must be a bool"),
    (dict(max_num_seqs=0), ValueError, r"max_num_seqs must be >= 1, got 0"),
    (dict(kvcache_block_size=17), ValueError, r"kvcache_block_size must be a positive multiple of 16"),
    (dict(device="tpu"), ValueError, r"device must be auto, cpu or cuda, got 'tpu'"),
    (dict(policy="fifo"), ValueError, r"policy must be prefill-first or mixed"),
    (dict(gpu_memory_utilization=1.5), ValueError, r"gpu_memory_utilization must be in \(0, 1\]"),
    (dict(kv_cache_dtype="f16"), ValueError, r"kv_cache_dtype must be auto, f32, bf16 or int8, got 'f16'"),
    (dict(quantization="int5"), ValueError, r"quantization must be auto, none, int8, int8-g32, int4, .* got 'int5'"),
    (dict(allow_nonfinite_weights="yes"), TypeError, r"Config\.allow_nonfinite_weights must be a bool"),
    # The tiny model's 4 heads do not split over 3 ranks: the engine's message comes through.
    (dict(tensor_parallel_size=3, device="cpu"), NanoVLLMError,
     r"tensor_parallel_size 3 does not divide the model's num_attention_heads \(4\)"),
])
def test_llm_config_errors(tiny_model, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        LLM(tiny_model, **kwargs)


def test_llm_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        LLM(str(tmp_path / "missing"))
    with pytest.raises(TypeError, match="model must be a path"):
        LLM(42)
    assert issubclass(NanoVLLMError, RuntimeError)


def test_unknown_kwargs_are_ignored(tiny_model):
    llm = LLM(tiny_model, hf_config=None, eos=-1, some_future_option=True, num_kvcache_blocks=8)
    assert llm.config.num_kvcache_blocks == 8
    assert llm.config.model == tiny_model


def test_config_reports_what_auto_settled_to(tiny_model):
    llm = LLM(tiny_model, device="cpu", quantization="int4", num_kvcache_blocks=8)
    c = llm.config
    assert (c.device, c.kv_cache_dtype, c.lm_head_quantization) == ("cpu", "f32", "int8")
    assert c.quantization == "int4"  # as given
    assert Config(allow_nonfinite_weights=True).allow_nonfinite_weights


@pytest.mark.parametrize("prompts,params,exc,match", [
    (123, None, TypeError, r"prompts must be a str or a list of prompts"),
    ([1, 2, 3], None, TypeError, r"flat list of ints"),
    ([[1, "a"]], None, TypeError, r"prompts\[0\]: token ids must be ints, got str"),
    ([[1, True]], None, TypeError, r"prompts\[0\]: token ids must be ints, got bool"),
    (["ok", 3.5], None, TypeError, r"prompts\[1\] must be a str or a list of token ids, got float"),
    ([[-1]], None, ValueError, r"prompts\[0\]: token id -1 is out of range"),
    ([[1], [10**6]], None, ValueError, r"prompts\[1\].*prompt token id 1000000 is outside the vocabulary"),
    ([[]], None, ValueError, r"prompts\[0\]: .*empty"),
    ([[1] * 200], None, ValueError, r"prompts\[0\]: .*max_model_len"),
    (["a"], SamplingParams(logit_bias={10**6: 1.0}), ValueError,
     r"prompts\[0\]: logit_bias token id 1000000 is outside the vocabulary"),
    (["a", "b"], [SamplingParams()] * 3, ValueError, r"got 3 SamplingParams for 2 prompts"),
    (["a"], {"temperature": 0}, TypeError, r"sampling_params must be a SamplingParams"),
    (["a"], ["x"], TypeError, r"sampling_params\[0\] must be a SamplingParams, got str"),
])
def test_generate_argument_errors(llm, prompts, params, exc, match):
    with pytest.raises(exc, match=match):
        llm.generate(prompts, params, use_tqdm=False)
    # Nothing is left behind: the engine is idle, and works.
    assert llm.is_finished()
    assert llm.step() == ([], 0)
    out = llm.generate(["fine"], SamplingParams(temperature=0, max_tokens=3), use_tqdm=False)
    assert len(out[0]["token_ids"]) == 3


def test_invalid_params_set_after_construction(llm):
    sp = SamplingParams()
    sp.min_tokens = 100  # > max_tokens: caught when the request is added
    with pytest.raises(ValueError, match=r"prompts\[0\]: min_tokens must be in"):
        llm.generate(["x"], sp, use_tqdm=False)
    assert llm.is_finished()


def test_chat_template_errors(llm):
    tok = llm.get_tokenizer()
    with pytest.raises(TypeError, match="conversation must be a list of messages"):
        tok.apply_chat_template("hi")
    with pytest.raises(ValueError, match="boom"):
        tok.apply_chat_template([{"role": "user", "content": "x"}],
                                chat_template="{{ raise_exception('boom') }}")
    with pytest.raises(TypeError, match="JSON values"):
        tok.apply_chat_template([{"role": "user", "content": object()}])
    with pytest.raises(TypeError, match="encode"):
        tok.encode(5)


def test_tokenizer_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        nanovllm.AutoTokenizer.from_pretrained(tmp_path)
