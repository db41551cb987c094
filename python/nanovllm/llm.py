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


def _logprob_dict(lp):
    """TokenLogprobs as a dict; "rank" only where it was computed (prompt_logprobs), so sampled
    tokens' entries equal the CLI's --json."""
    d = lp.to_dict()
    if not d.get("rank"):
        d.pop("rank", None)
    return d


def _completion_dict(out):
    d = {"text": out.text, "token_ids": out.token_ids, "finish_reason": out.finish_reason}
    if out.logprobs:
        d["logprobs"] = [_logprob_dict(lp) for lp in out.logprobs]
    if out.embedding:
        d["embedding"] = list(out.embedding)
    if out.prompt_logprobs:
        d["prompt_logprobs"] = [None] + [_logprob_dict(lp) for lp in out.prompt_logprobs]
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
        # An HF directory (config.json) or a GGUF model (a .gguf file, or a folder with one).
        is_gguf = model.endswith(".gguf") or (
            os.path.isdir(model) and any(n.endswith(".gguf") for n in os.listdir(model)))
        if not is_gguf and not os.path.isfile(os.path.join(model, "config.json")):
            raise FileNotFoundError(f"model directory {model!r} has no config.json (and no .gguf file)")
        fields = {k: v for k, v in kwargs.items() if k in Config.fields and k != "model"}
        if "worker_command" not in fields:
            fields["worker_command"] = _worker_command()
        self._engine = _core.Engine(Config(model, **fields))
        self._tokenizer = None
        # Every request's events go to an EventQueue of its own caller: generate() and stream()
        # give each prompt one; add_request() requests share self._low, which step() drains.
        # Several threads may share one engine: _lock orders the low-level API's bookkeeping.
        self._lock = threading.RLock()
        self._low = _core.EventQueue()
        self._low_stream = set()   # add_request(stream=True) requests still running
        self._low_deltas = []      # their StreamDeltas not yet taken

    # --- nano-vLLM's LLMEngine interface ------------------------------------------------------
    def add_request(self, prompt, sampling_params=None, stream=False):
        """Enqueues one prompt (str or token ids); returns its request id. step() returns its
        outputs when it finishes; with stream=True its deltas are returned by take_stream_deltas()."""
        sp = normalize_params(sampling_params, 1)[0]
        with self._lock:
            rid = self._engine.add_request(normalize_prompt(prompt), sp, self._low, bool(stream))
            if stream:
                self._low_stream.add(rid)
        return rid

    def step(self):
        """One engine step. Returns (outputs, num_tokens) like nano-vLLM: outputs are
        (request_id, token_ids) of requests added with add_request() that finished; num_tokens is
        the step's prefill tokens, or minus its decode tokens. A request with n > 1 gives one
        (request_id, token_ids) per completion, each when that completion finishes."""
        steps = self._engine.stats().steps
        self._engine.step()
        outs = []
        with self._lock:
            for e in self._low.take():
                rid = e.delta.request_id
                if rid in self._low_stream:
                    self._low_deltas.append(e.delta)
                    if e.request_finished:
                        self._low_stream.discard(rid)
                if e.output is not None:
                    outs.append((rid, e.output.token_ids))
        if self._engine.stats().steps == steps:  # nothing was scheduled
            return outs, 0
        s = self._engine.last_step_stats()
        num_tokens = s.num_prefill_tokens if s.num_prefill_tokens > 0 else -s.num_decode_tokens
        return outs, num_tokens

    def is_finished(self):
        return self._engine.is_finished() and self._low.empty()

    def abort(self, request_id):
        self._engine.abort(request_id)

    def take_stream_deltas(self):
        """StreamDeltas of add_request(..., stream=True) requests produced so far."""
        with self._lock:
            out, self._low_deltas = self._low_deltas, []
        return out

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
        outputs = {i: [None] * sp.n for i, sp in enumerate(params)}
        bar = ProgressBar(len(prompts), enabled=bool(use_tqdm))
        try:
            while pending:
                seconds = self._step_checked(pending)
                bar.step(self._engine.last_step_stats(), seconds)
                for i, (rid, q) in list(pending.items()):
                    for e in q.take():
                        if e.output is not None:
                            outputs[i][e.output.index] = e.output
                        if e.request_finished:
                            del pending[i]
                            results[i] = self._collect(outputs.pop(i), i)
                            bar.finished()
        except BaseException:
            self._abort_all(pending)
            raise
        finally:
            bar.close()
        return results

    def embed(self, prompts, use_tqdm=False):
        """An embedding engine (LLM(model, task="embed"), or a model folder with
        sentence-transformers pooling files): one pooled vector (list of float) per prompt."""
        if self.config.task != "embed":
            raise ValueError("embed() needs an embedding engine: LLM(model, task=\"embed\")")
        return [r["embedding"] for r in self.generate(prompts, None, use_tqdm=use_tqdm)]

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
        try:
            while pending:
                self._step_checked(pending)
                for i, (rid, q) in list(pending.items()):
                    for e in q.take():
                        d = e.delta
                        if e.request_finished:
                            del pending[i]
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
        """Adds every prompt, each with its own EventQueue; returns {index: (request_id, queue)}.
        All or nothing."""
        pending = {}
        try:
            for i, (p, sp) in enumerate(zip(prompts, params)):
                q = _core.EventQueue()
                try:
                    rid = self._engine.add_request(p, sp, q, stream)
                except ValueError as e:
                    raise ValueError(f"prompts[{i}]: {e}") from None
                pending[i] = (rid, q)
        except BaseException:
            self._abort_all(pending)
            raise
        return pending

    def _step_checked(self, pending):
        """One engine step (the GIL is released while it runs); returns its wall time. Raises if
        the engine is idle while a pending request has no event left to read (never spins)."""
        t = perf_counter()
        self._engine.step()
        seconds = perf_counter() - t
        # is_finished() is read after the step: every event of a finished request is queued by then.
        if self._engine.is_finished() and all(q.empty() for _, q in pending.values()):
            raise NanoVLLMError("the engine is idle but requests are unfinished")
        return seconds

    @staticmethod
    def _collect(outs, index):
        for o in outs:
            if o.finish_reason == "error":
                raise ValueError(f"prompts[{index}]: {o.error}")
        return _output_dict(outs)

    def _abort_all(self, pending):
        """Aborts unfinished requests; their final events go to queues nobody reads any more."""
        for rid, _ in pending.values():
            self._engine.abort(rid)
        pending.clear()


# nano-vLLM's LLM is a thin subclass of its LLMEngine; here they are the same class.
LLMEngine = LLM
