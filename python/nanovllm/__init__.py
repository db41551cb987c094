"""nanovllm: a C++/CUDA re-implementation of nano-vLLM with nano-vLLM's Python API.

    from nanovllm import LLM, SamplingParams
    llm = LLM("/path/to/Qwen3-0.6B", enforce_eager=True)
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0.6, max_tokens=64))
    outputs[0]["text"], outputs[0]["token_ids"]

Errors: wrong argument types raise TypeError, bad values ValueError, and failures inside the
engine NanoVLLMError (a RuntimeError) carrying the C++ message.
"""
from ._core import (BackendOptions, Config, EngineStats, NanoVLLMError, RequestOutput,
                    SamplingParams, StepStats, StreamDelta, StructuredOutputsParams)
from .llm import LLM, LLMEngine
from .tokenizer import AutoTokenizer, Tokenizer

__version__ = "0.1.0"

__all__ = [
    "LLM", "LLMEngine", "SamplingParams", "Config", "BackendOptions", "Tokenizer", "AutoTokenizer", "NanoVLLMError",
    "RequestOutput", "StreamDelta", "EngineStats", "StepStats", "StructuredOutputsParams", "__version__",
]
