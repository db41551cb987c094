"""generate()'s progress bar: finished prompts out of all, with the prefill and decode
throughput of the latest steps, like nano-vLLM's tqdm bar. Uses tqdm when installed (Debian:
python3-tqdm), else the engine's own terminal bar."""
try:
    from tqdm.auto import tqdm as _tqdm
except ImportError:  # pragma: no cover - depends on the environment
    _tqdm = None

from . import _core


class ProgressBar:
    def __init__(self, total, enabled=True, desc="Generating"):
        self._prefill = 0.0
        self._decode = 0.0
        self._done = 0
        self._bar = None
        self._fallback = None
        if not enabled:
            return
        if _tqdm is not None:
            self._bar = _tqdm(total=total, desc=desc, dynamic_ncols=True)
        else:
            self._fallback = _core.ProgressBar(desc, total, True)

    def step(self, step_stats, seconds):
        """After an engine step: refresh the throughput shown (tokens of the step / its time)."""
        if seconds > 0:
            if step_stats.num_prefill_tokens > 0:
                self._prefill = step_stats.num_prefill_tokens / seconds
            elif step_stats.num_decode_tokens > 0:
                self._decode = step_stats.num_decode_tokens / seconds
        rates = {"Prefill": f"{int(self._prefill)}tok/s", "Decode": f"{int(self._decode)}tok/s"}
        if self._bar is not None:
            self._bar.set_postfix(rates, refresh=False)
        elif self._fallback is not None:
            self._fallback.update(self._done, " ".join(f"{k} {v}" for k, v in rates.items()))

    def finished(self, n=1):
        """n more prompts finished."""
        self._done += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._fallback is not None:
            self._fallback.update(self._done)
            self._fallback.finish()
            self._fallback = None
