"""A tensor-parallel rank > 0 in a Python process: what LLM(..., tensor_parallel_size=N) starts
N-1 times on this machine (the same flags as `nanovllm worker`). Started by hand on another
machine for a multi-machine group:

    python -m nanovllm._worker --rank 1 --tensor-parallel-size 2 --dist-init-addr HOST:PORT
"""
import argparse
import sys


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m nanovllm._worker", description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--tensor-parallel-size", type=int, required=True)
    p.add_argument("--dist-init-addr", required=True, help="HOST:PORT of rank 0's rendezvous")
    p.add_argument("--dist-timeout", type=float, default=120.0)
    p.add_argument("--watchdog-fd", type=int, default=-1, help="set by rank 0 when it starts the worker")
    a = p.parse_args(argv)
    from . import _core
    try:
        return _core.run_worker(a.rank, a.tensor_parallel_size, a.dist_init_addr, a.watchdog_fd,
                                a.dist_timeout)
    except _core.NanoVLLMError as e:
        print(f"nanovllm worker rank {a.rank}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
