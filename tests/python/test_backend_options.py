"""BackendOptions from Python: Config.backend's defaults come from the NANOVLLM_* environment,
the options are validated, and an engine runs with the ones it was given."""
import os

import pytest

from nanovllm import LLM, BackendOptions, Config, SamplingParams


def test_defaults_come_from_the_environment():
    b = Config().backend
    assert b.num_threads == int(os.environ.get("NANOVLLM_NUM_THREADS", "0"))
    d = BackendOptions()
    assert (d.num_threads, d.spin_us, d.adaptive_threads, d.cpu_weight_copy) == (0, 2000, True, True)
    assert (d.linear_path, d.isa, d.cuda_prefill, d.cuda_decode, d.cuda_gemm) == ("auto", "", "simple", "v2", "auto")


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(linear_path="fastest"), ValueError,
     r"BackendOptions\.linear_path must be auto, streaming, blas or onednn, got 'fastest'"),
    (dict(cuda_prefill="wmma"), ValueError, r"cuda_prefill must be simple or tc, got 'wmma'"),
    (dict(cuda_decode="v3"), ValueError, r"cuda_decode must be v1 or v2, got 'v3'"),
    (dict(cuda_gemm="gemv"), ValueError, r"cuda_gemm must be cublas, skinny or auto, got 'gemv'"),
    (dict(isa="avx9"), ValueError, r"isa must be '', avxvnni, avx2 or scalar, got 'avx9'"),
    (dict(spin_us=-1), ValueError, r"spin_us must be >= 0, got -1"),
    (dict(cpu_weight_copy="no"), TypeError, r"cpu_weight_copy"),
])
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        BackendOptions(**kwargs)


def test_config_backend_must_be_backend_options():
    with pytest.raises(TypeError, match="Config.backend must be a BackendOptions"):
        Config(backend={"linear_path": "blas"})
    c = Config(backend=BackendOptions(linear_path="blas", spin_us=0))
    assert c.backend.linear_path == "blas" and c.backend.spin_us == 0


def test_engine_runs_with_its_options(tiny_model):
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    prompts = [[1, 2, 3, 4]]
    base = LLM(tiny_model, device="cpu").generate(prompts, params)[0]["token_ids"]
    opts = BackendOptions(linear_path="blas", cpu_weight_copy=False, spin_us=0,
                          adaptive_threads=False)
    llm = LLM(tiny_model, device="cpu", backend=opts)
    assert llm.config.backend == opts
    # F32 weights: BLAS and the streaming kernel are both exact f32 (greedy tokens agree).
    assert llm.generate(prompts, params)[0]["token_ids"] == base
