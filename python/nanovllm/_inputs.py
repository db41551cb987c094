"""Checks and normalizes generate()'s arguments: prompts and sampling params.

A prompt is a str, a sequence of token ids (list, tuple, numpy array), or vLLM's dict form
{"prompt": str} / {"prompt_token_ids": [...]}. Wrong types raise TypeError naming the prompt's
index; token ids outside int32 raise ValueError (ids outside the vocabulary are rejected by the
engine, also as ValueError).
"""
import operator

from ._core import SamplingParams

_INT32_MAX = 2**31 - 1


def _token_ids(p, where):
    if all(type(t) is int for t in p):  # fast path: a plain list of Python ints
        ids = list(p)
    else:
        ids = []
        for t in p:
            if isinstance(t, bool) or type(t).__name__ in ("bool_", "bool"):
                raise TypeError(f"{where}: token ids must be ints, got {type(t).__name__}")
            try:
                ids.append(operator.index(t))
            except TypeError:
                raise TypeError(f"{where}: token ids must be ints, got {type(t).__name__} "
                                f"({t!r})") from None
    if ids and (min(ids) < 0 or max(ids) > _INT32_MAX):
        bad = next(t for t in ids if t < 0 or t > _INT32_MAX)
        raise ValueError(f"{where}: token id {bad} is out of range [0, 2**31)")
    return ids


def normalize_prompt(p, where="prompt"):
    """Returns a str or a list of int token ids."""
    if isinstance(p, str):
        return p
    if isinstance(p, dict):
        if "prompt_token_ids" in p:
            return normalize_prompt(p["prompt_token_ids"], where)
        if "prompt" in p and isinstance(p["prompt"], str):
            return p["prompt"]
        raise TypeError(f"{where}: a dict prompt needs 'prompt' (str) or 'prompt_token_ids', "
                        f"got keys {sorted(p)}")
    if isinstance(p, (bytes, bytearray)) or not hasattr(p, "__iter__"):
        raise TypeError(f"{where} must be a str or a list of token ids, got {type(p).__name__}")
    return _token_ids(p, where)


def normalize_prompts(prompts):
    """A single str is one prompt; otherwise a list/tuple of prompts."""
    if isinstance(prompts, (str, dict)):
        return [normalize_prompt(prompts, "prompts[0]")]
    if not isinstance(prompts, (list, tuple)):
        raise TypeError("prompts must be a str or a list of prompts (str or token-id lists), got "
                        f"{type(prompts).__name__}")
    if prompts and all(type(t) is int for t in prompts):
        raise TypeError("prompts is a flat list of ints: pass a list of prompts, e.g. "
                        "[[1, 2, 3]] for one token-id prompt")
    return [normalize_prompt(p, f"prompts[{i}]") for i, p in enumerate(prompts)]


def normalize_params(sampling_params, n):
    """One SamplingParams (shared), a list with one per prompt, or None (defaults)."""
    if sampling_params is None:
        return [SamplingParams()] * n
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * n
    if not isinstance(sampling_params, (list, tuple)):
        raise TypeError("sampling_params must be a SamplingParams or a list of them, got "
                        f"{type(sampling_params).__name__}")
    for i, sp in enumerate(sampling_params):
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"sampling_params[{i}] must be a SamplingParams, got "
                            f"{type(sp).__name__}")
    if len(sampling_params) != n:
        raise ValueError(f"got {len(sampling_params)} SamplingParams for {n} prompts (give one "
                         "SamplingParams, or a list with one per prompt)")
    return list(sampling_params)
