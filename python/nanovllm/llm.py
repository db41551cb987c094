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


def _completion_dict(out):
    d = {"text": out.text, "token_ids": out.token_ids, "finish_reason": out.finish_reason}
    if out.logprobs:
        d["logprobs"] = [lp.to_dict() for lp in out.logprobs]
    return d


def _output_dict(outs):
    """generate()'s result for one prompt (outs: its completions in index order): nano-vLLM's
    {"text", "token_ids"} of completion 0 plus extras; with n > 1 also "outputs", one
    {"index", "text", "token_ids", "finish_reason"[, "logprobs"]} per completion."""
    d = _completion_dict(outs[0])
    d["prompt_token_ids"] = outs[0].prompt_token_ids
    d["num_cached_tokens"] = outs[0].num_cached_tokens
    if len(outs) > 1:
        d["outputs"] = [dict(index=o.index, **_completion_dict(o)) for o in outs]
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
        # A request with SamplingParams.n > 1 gives n RequestOutputs (one per completion, told
        # apart by .index), each when that completion finishes.
        self._finished = {}    # request_id -> [RequestOutput] arrived, not yet collected
        self._awaited = {}     # request_id -> how many of its RequestOutputs have not arrived
        self._deltas = {}      # request_id -> [StreamDelta] not yet consumed
        self._owned = set()    # requests of running generate()/stream() calls
        self._discard = {}     # request_id -> outputs still to drop (aborted / stream done)

    # --- nano-vLLM's LLMEngine interface ------------------------------------------------------
    def add_request(self, prompt, sampling_params=None, stream=False):
        """Enqueues one prompt (str or token ids); returns its request id. With stream=True its
        deltas are returned by take_stream_deltas()."""
        sp = normalize_params(sampling_params, 1)[0]
        with self._lock:
            rid = self._engine.add_request(normalize_prompt(prompt), sp, bool(stream))
            self._awaited[rid] = sp.n
        return rid

    def step(self):
        """One engine step. Returns (outputs, num_tokens) like nano-vLLM: outputs are
        (request_id, token_ids) of requests added with add_request() that finished; num_tokens is
        the step's prefill tokens, or minus its decode tokens. A request with n > 1 gives one
        (request_id, token_ids) per completion, each when that completion finishes."""
        with self._lock:
            steps = self._engine.stats().steps
            self._pump()
            mine = [rid for rid in self._finished if rid not in self._owned]
            outs = [(rid, o.token_ids) for rid in mine for o in self._finished.pop(rid)]
            for rid in mine:
                if self._awaited.get(rid) == 0:
                    del self._awaited[rid]
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
        "prompt_token_ids", "num_cached_tokens"[, "logprobs"]}; with SamplingParams.n > 1 these
        are completion 0's, and "outputs" lists all n ({"index", "text", "token_ids",
        "finish_reason"[, "logprobs"]}). A prompt the engine cannot run (too long, empty, ids
        outside the vocabulary) raises ValueError."""
        prompts = normalize_prompts(prompts)
        params = normalize_params(sampling_params, len(prompts))
        pending = self._add_all(prompts, params, stream=False)
        results = [None] * len(prompts)
        bar = ProgressBar(len(prompts), enabled=bool(use_tqdm))
        try:
            while pending:
                seconds = self._pump(owned=pending)
                bar.step(self._engine.last_step_stats(), seconds)
                for rid in [r for r in pending if self._awaited.get(r) == 0]:
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
        {"index", "completion", "text", "token_ids", "finished", "finish_reason"} where index is
        the prompt's, completion which of its SamplingParams.n completions (0 when n = 1), and
        text and token_ids are new since that completion's previous piece (concatenated they give
        generate()'s output); "finished" marks that completion's last piece. Closing the
        generator early aborts the unfinished prompts."""
        prompts = normalize_prompts(prompts)
        params = normalize_params(sampling_params, len(prompts))
        pending = self._add_all(prompts, params, stream=True)
        unfinished = {rid: params[i].n for rid, i in pending.items()}  # completions still going
        try:
            while pending:
                self._pump(owned=pending)
                for rid in [r for r in pending if r in self._deltas]:
                    i = pending[rid]
                    for d in self._deltas.pop(rid):
                        if d.finished:
                            unfinished[rid] -= 1
                            if unfinished[rid] == 0:
                                del pending[rid]
                                self._forget(rid)
                        if d.finish_reason == "error":
                            raise ValueError(f"prompts[{i}]: {d.error}")
                        yield {"index": i, "completion": d.index, "text": d.text,
                               "token_ids": d.token_ids, "finished": d.finished,
                               "finish_reason": d.finish_reason or None}
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
                    self._awaited[rid] = sp.n
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
                rid = o.request_id
                if rid in self._discard:
                    self._discard[rid] -= 1
                    if self._discard[rid] == 0:
                        del self._discard[rid]
                    continue
                self._finished.setdefault(rid, []).append(o)
                if rid in self._awaited:
                    self._awaited[rid] -= 1
            for d in self._engine.take_stream_deltas():
                self._deltas.setdefault(d.request_id, []).append(d)
            if owned and not outs and self._engine.is_finished() and \
                    not any(self._awaited.get(r) == 0 or r in self._deltas for r in owned):
                raise NanoVLLMError("the engine is idle but requests are unfinished")  # never spin
        return seconds

    def _collect(self, rid, index):
        outs = sorted(self._finished.pop(rid), key=lambda o: o.index)
        del self._awaited[rid]
        self._owned.discard(rid)
        for o in outs:
            if o.finish_reason == "error":
                raise ValueError(f"prompts[{index}]: {o.error}")
        return _output_dict(outs)

    def _forget(self, rid):
        """Drops a request's state; its RequestOutputs still to come are dropped on arrival."""
        self._finished.pop(rid, None)
        self._deltas.pop(rid, None)
        self._owned.discard(rid)
        left = self._awaited.pop(rid, 0)
        if left > 0:
            self._discard[rid] = self._discard.get(rid, 0) + left

    def _abort_all(self, pending):
        """Aborts unfinished requests; their abort outputs are dropped when they come back."""
        with self._lock:
            for rid in list(pending):
                self._engine.abort(rid)  # every unfinished completion: an abort output next step
                self._forget(rid)
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
