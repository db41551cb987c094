"""nanovllm.LLM: nano-vLLM's LLM / LLMEngine API over the C++ engine.

The generation loops run here, one engine step per iteration: the C++ step releases the GIL,
and Ctrl-C (KeyboardInterrupt) is raised between steps; generate() and stream() then abort their
unfinished requests, so the engine is idle and reusable afterwards.
"""
import os
import sys
import threading
from time import perf_counter

from . import _core
from ._core import Config, NanoVLLMError
from ._inputs import normalize_params, normalize_prompt, normalize_prompts
from .progress import ProgressBar
from .tokenizer import Tokenizer


def _output_dict(out):
    """generate()'s result for one prompt: nano-vLLM's {"text", "token_ids"} plus extras."""
    d = {"text": out.text, "token_ids": out.token_ids, "finish_reason": out.finish_reason,
         "prompt_token_ids": out.prompt_token_ids, "num_cached_tokens": out.num_cached_tokens}
    if out.logprobs:
        d["logprobs"] = [lp.to_dict() for lp in out.logprobs]
    return d


def _worker_command():
    """How rank 0 starts ranks 1..N-1 (tensor_parallel_size > 1): this interpreter running
    nanovllm._worker from this package's location, whatever sys.path the caller set up."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys; sys.path.insert(0, %r); from nanovllm._worker import main; "
            "sys.exit(main(sys.argv[1:]))" % parent)
    return [sys.executable, "-c", code]


class LLM:
    """LLM(model, **kwargs): kwargs are Config fields (nano-vLLM's enforce_eager,
    tensor_parallel_size, max_num_batched_tokens, max_num_seqs, max_model_len,
    gpu_memory_utilization, kvcache_block_size, num_kvcache_blocks, and nanovllm's device,
    policy, enable_prefix_caching, num_threads, cpu_kvcache_bytes, trace_path, ...). Unknown keyword
    arguments are ignored, as nano-vLLM ignores them."""

    def __init__(self, model, **kwargs):
        try:
            model = os.fspath(model)
        except TypeError:
            raise TypeError(f"model must be a path (str or os.PathLike), got "
                            f"{type(model).__name__}") from None
        if not isinstance(model, str):
            raise TypeError(f"model must be a str path, got {type(model).__name__}")
        if not os.path.isfile(os.path.join(model, "config.json")):
            raise FileNotFoundError(f"model directory {model!r} has no config.json")
        fields = {k: v for k, v in kwargs.items() if k in Config.fields and k != "model"}
        if "worker_command" not in fields:
            fields["worker_command"] = _worker_command()
        self._engine = _core.Engine(Config(model, **fields))
        self._tokenizer = None
        # Outputs are routed per request, so generate()/stream() calls in several threads and
        # add_request()/step() users share one engine; _lock orders step + routing.
        self._lock = threading.RLock()
        self._finished = {}    # request_id -> RequestOutput not yet collected
        self._deltas = {}      # request_id -> [StreamDelta] not yet consumed
        self._owned = set()    # requests of running generate()/stream() calls
        self._discard = set()  # aborted by generate()/stream(): drop their outputs

    # --- nano-vLLM's LLMEngine interface ------------------------------------------------------
    def add_request(self, prompt, sampling_params=None, stream=False):
        """Enqueues one prompt (str or token ids); returns its request id. With stream=True its
        deltas are returned by take_stream_deltas()."""
        sp = normalize_params(sampling_params, 1)[0]
        return self._engine.add_request(normalize_prompt(prompt), sp, bool(stream))

    def step(self):
        """One engine step. Returns (outputs, num_tokens) like nano-vLLM: outputs are
        (request_id, token_ids) of requests added with add_request() that finished; num_tokens is
        the step's prefill tokens, or minus its decode tokens."""
        with self._lock:
            steps = self._engine.stats().steps
            self._pump()
            mine = [rid for rid in self._finished if rid not in self._owned]
            outs = [(rid, self._finished.pop(rid).token_ids) for rid in mine]
            if self._engine.stats().steps == steps:  # nothing was scheduled
                return outs, 0
            s = self._engine.last_step_stats()
        num_tokens = s.num_prefill_tokens if s.num_prefill_tokens > 0 else -s.num_decode_tokens
        return outs, num_tokens

    def is_finished(self):
        return self._engine.is_finished() and not (self._finished.keys() - self._owned)

    def abort(self, request_id):
        self._engine.abort(request_id)

    def take_stream_deltas(self):
        """StreamDeltas of add_request(..., stream=True) requests produced so far."""
        with self._lock:
            mine = [rid for rid in self._deltas if rid not in self._owned]
            return [d for rid in mine for d in self._deltas.pop(rid)]

    # --- offline generation ------------------------------------------------------------------
    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        """Returns one dict per prompt, in prompt order: {"text", "token_ids", "finish_reason",
        "prompt_token_ids", "num_cached_tokens"[, "logprobs"]}. A prompt the engine cannot run
        (too long, empty, ids outside the vocabulary) raises ValueError."""
        prompts = normalize_prompts(prompts)
        params = normalize_params(sampling_params, len(prompts))
        pending = self._add_all(prompts, params, stream=False)
        results = [None] * len(prompts)
        bar = ProgressBar(len(prompts), enabled=bool(use_tqdm))
        try:
            while pending:
                seconds = self._pump(owned=pending)
                bar.step(self._engine.last_step_stats(), seconds)
                for rid in [r for r in pending if r in self._finished]:
                    i = pending.pop(rid)
                    results[i] = self._collect(rid, i)
                    bar.finished()
        except BaseException:
            self._abort_all(pending)
            raise
        finally:
            bar.close()
        return results

    def stream(self, prompts, sampling_params=None):
        """Yields the output of every prompt piece by piece, as the engine produces it:
        {"index", "text", "token_ids", "finished", "finish_reason"} where text and token_ids
        are new since that prompt's previous piece (concatenated they give generate()'s
        output). Closing the generator early aborts the unfinished prompts."""
        prompts = normalize_prompts(prompts)
        params = normalize_params(sampling_params, len(prompts))
        pending = self._add_all(prompts, params, stream=True)
        try:
            while pending:
                self._pump(owned=pending)
                for rid in [r for r in pending if r in self._deltas]:
                    i = pending[rid]
                    for d in self._deltas.pop(rid):
                        if d.finished:
                            del pending[rid]
                            self._owned.discard(rid)
                            self._finished.pop(rid, None)
                        if d.finish_reason == "error":
                            raise ValueError(f"prompts[{i}]: {d.error}")
                        yield {"index": i, "text": d.text, "token_ids": d.token_ids,
                               "finished": d.finished, "finish_reason": d.finish_reason or None}
        finally:  # also on GeneratorExit (closed early) and KeyboardInterrupt
            self._abort_all(pending)

    # --- other accessors ---------------------------------------------------------------------
    def get_tokenizer(self):
        """The model's tokenizer (HF-style encode/decode/apply_chat_template)."""
        if self._tokenizer is None:
            core = self._engine.tokenizer()
            if core is None:
                raise ValueError("the model directory has no tokenizer.json")
            self._tokenizer = Tokenizer(core)
        return self._tokenizer

    def stats(self):
        """Cumulative EngineStats (steps, prefill/decode tokens and seconds, prefix-cache hits,
        preemptions, KV blocks, queue lengths); .to_dict() for a dict."""
        return self._engine.stats()

    @property
    def config(self):
        """The engine's Config after clipping max_model_len and sizing the KV cache."""
        return self._engine.config()

    def exit(self):
        """nano-vLLM's exit(): nothing to tear down (no worker processes); kept for scripts."""

    # --- internals ---------------------------------------------------------------------------
    def _add_all(self, prompts, params, stream):
        """Adds every prompt; returns {request_id: index}. All or nothing."""
        pending = {}
        try:
            for i, (p, sp) in enumerate(zip(prompts, params)):
                with self._lock:
                    try:
                        rid = self._engine.add_request(p, sp, stream)
                    except ValueError as e:
                        raise ValueError(f"prompts[{i}]: {e}") from None
                    pending[rid] = i
                    self._owned.add(rid)
        except BaseException:
            self._abort_all(pending)
            raise
        return pending

    def _pump(self, owned=()):
        """One engine step; finished outputs and stream deltas go to per-request buckets.
        Returns the step's wall time. An error output of an `owned` request raises ValueError."""
        with self._lock:
            t = perf_counter()
            outs = self._engine.step()
            seconds = perf_counter() - t
            for o in outs:
                if o.request_id in self._discard:
                    self._discard.discard(o.request_id)
                else:
                    self._finished[o.request_id] = o
            for d in self._engine.take_stream_deltas():
                self._deltas.setdefault(d.request_id, []).append(d)
            if owned and not outs and self._engine.is_finished() and \
                    not any(r in self._finished or r in self._deltas for r in owned):
                raise NanoVLLMError("the engine is idle but requests are unfinished")  # never spin
        return seconds

    def _collect(self, rid, index):
        out = self._finished.pop(rid)
        self._owned.discard(rid)
        if out.finish_reason == "error":
            raise ValueError(f"prompts[{index}]: {out.error}")
        return _output_dict(out)

    def _abort_all(self, pending):
        """Aborts unfinished requests; their abort outputs are dropped when they come back."""
        with self._lock:
            for rid in list(pending):
                self._engine.abort(rid)
                if self._finished.pop(rid, None) is None:
                    self._discard.add(rid)
                self._deltas.pop(rid, None)
                self._owned.discard(rid)
            for d in self._engine.take_stream_deltas():  # abort's final deltas, pushed at once
                if d.request_id not in pending:
                    self._deltas.setdefault(d.request_id, []).append(d)
            pending.clear()
            # The engine reports aborted requests on its next step(); with nothing else queued
            # that step computes nothing, and afterwards the engine is idle (is_finished()).
            s = self._engine.stats()
            if s.num_running == 0 and s.num_waiting == 0:
                self._pump()


# nano-vLLM's LLM is a thin subclass of its LLMEngine; here they are the same class.
LLMEngine = LLM
