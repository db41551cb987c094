#!/usr/bin/python3
"""One-command peer comparison (issue 16): nanovllm against llama.cpp on the same random
Qwen3-shaped weights, on the CPU, runs alternated, medians, ratios from the same run.

    /usr/bin/python3 bench/peer/compare.py [--preset qwen3-0.6b] [--rounds 3 (0: set up only)] [--threads 2]
                                           [--workloads decode1,prefill512,b4,b64,server32]
                                           [--kv-cache-dtype bf16|f32|int8] [--json OUT]
    ... --workloads benchpy [--benchpy-seqs 256] [--benchpy-slots 64] [--kv-cache-bytes B]

What it does (everything third-party goes to the ignored cache folder .cache/peer/, or
$NANOVLLM_PEER_CACHE; nothing of it enters the repository):
  1. llama.cpp: `npm pack node-llama-cpp@3.22.1` (npm registry), whose llama/gitRelease.bundle is a
     git bundle of llama.cpp; clone it and build llama-bench, llama-batched-bench,
     llama-quantize and llama-server (CMake, Release, GGML_NATIVE; ggml's AMX tile-config call
     patched to inline asm, see patch_amx_tile_config). Skipped when already built.
  2. The model: `nanovllm make-model --arch qwen3 --preset P --dtype bf16 --seed 0` (with the
     Qwen3 tokenizer), converted to GGUF bf16 by hf_to_gguf.py (llama.cpp's gguf-py + Debian's
     numpy, no torch), then llama-quantize to Q8_0 and Q4_0.
  3. Workloads, each engine/format in turn per round (the machine's speed drifts: alternation
     and same-run ratios are what count):
     The MoE comparison: --arch qwen3_moe --preset qwen3-moe-2b (3 layers of Qwen3-30B-A3B's shape,
     128 experts, top 8, every layer sparse: ~2.2B parameters).
       decode1     batch-1 decode, 128 tokens     llama-bench -p 0 -n 128      | nanovllm bench 1 x (4 + 128)
       prefill512  one 512-token prompt            llama-bench -p 512 -n 0      | nanovllm bench 1 x (512 + 1)
       b4, b64     128 + 128 tokens, B sequences   llama-batched-bench -npp 128 -ntg 128 -npl B (S_TG)
                                                   | nanovllm bench B x (128 + 128) decode tok/s
       server32    32 clients at once, 128 + 128   llama-server -np 32 (unified KV cache)
                   output tok/s (serve_load.py)    | nanovllm serve
       benchpy     nano-vLLM's bench.py workload (256 sequences, prompts 100-1024 random ids,
                   100-1024 output tokens each, temperature 0.6, ignore_eos), output tok/s;
                   not in the default list (an hour or more per engine on 2 cores)
                   | nanovllm bench --num-seqs N --kv-cache-bytes B (the same draws)
                   | llama-server -np SLOTS -kvu -c (B / its f16 KV bytes per token): the same
                   KV bytes; serve_load.run_workload sends the same requests in order, as many
                   at once as the slots and the cache allow (it cannot preempt, so a request is
                   admitted only when its whole prompt + max_tokens fits beside the others');
                   top-k / top-p / min-p off (bench.py samples with the temperature alone).
                   With -kvu every query's attention spans all the cache's used cells, other
                   sequences' included (masked): the cost of the unified cache the issue asks for
  4. Prints the table (tok/s, medians over rounds) and the ratios; `uptime` load before/after.
Not a test: nothing here runs in `make test`."""
import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_load  # noqa: E402  (the client half of the server32 workload)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("NANOVLLM_PEER_CACHE", os.path.join(ROOT, ".cache", "peer"))
NPM_PKG = "node-llama-cpp@3.22.1"
LLAMA = os.path.join(CACHE, "llama.cpp")
LLAMA_BIN = os.path.join(LLAMA, "build", "bin")
TARGETS = ["llama-bench", "llama-batched-bench", "llama-quantize", "llama-server"]
OURS = {"bf16": [], "int8": ["--quantization", "int8"], "int4": ["--quantization", "int4"]}
PEER = {"bf16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0"}
WORKLOADS = {"decode1": "batch-1 decode tok/s", "prefill512": "prefill, 512-token prompt, tok/s",
             "b4": "128+128, B=4, decode tok/s", "b64": "128+128, B=64, decode tok/s",
             "server32": "server, 32 concurrent, output tok/s",
             "benchpy": "bench.py workload, output tok/s"}
DEFAULT_WORKLOADS = "decode1,prefill512,b4,b64,server32"
SERVER_CLIENTS = 32


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("+ " + " ".join(map(str, cmd)))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def out(cmd, timeout=3600):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"`{' '.join(map(str, cmd))}` exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def uptime():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def patch_amx_tile_config():
    """GCC 12 miscompiles ggml's `_tile_loadconfig(&tc)` in amx/mmq.cpp: on CPUs with AMX the
    Q4_0 / Q8_0 paths then crash. The same instruction written as inline asm (`ldtilecfg` of the
    64-byte config) builds correctly. Idempotent; returns True when the file changed."""
    path = os.path.join(LLAMA, "ggml", "src", "ggml-cpu", "amx", "mmq.cpp")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fixed = text.replace("_tile_loadconfig(&tc);", 'asm volatile("ldtilecfg %0" :: "m"(tc));')
    if fixed == text:
        return False
    with open(path, "w", encoding="utf-8") as f:
        f.write(fixed)
    log(f"patched {path}: _tile_loadconfig -> inline ldtilecfg (GCC 12 + AMX)")
    return True


def ensure_llama():
    if os.path.isdir(os.path.join(LLAMA, ".git")) and patch_amx_tile_config():
        for t in TARGETS:  # rebuild what links the patched file
            if os.path.exists(os.path.join(LLAMA_BIN, t)):
                os.remove(os.path.join(LLAMA_BIN, t))
    if all(os.path.exists(os.path.join(LLAMA_BIN, t)) for t in TARGETS):
        return
    os.makedirs(CACHE, exist_ok=True)
    bundle = os.path.join(CACHE, "package", "llama", "gitRelease.bundle")
    if not os.path.exists(bundle):
        tgz = os.path.join(CACHE, "node-llama-cpp-3.22.1.tgz")
        if not os.path.exists(tgz):
            run(["npm", "pack", NPM_PKG], cwd=CACHE)
        with tarfile.open(tgz) as t:
            t.extract("package/llama/gitRelease.bundle", CACHE)
    if not os.path.isdir(os.path.join(LLAMA, ".git")):
        run(["git", "clone", "-q", bundle, LLAMA])
    patch_amx_tile_config()
    run(["cmake", "-S", LLAMA, "-B", os.path.join(LLAMA, "build"), "-G", "Ninja",
         # GGML_CCACHE=OFF: ccache keys on the literal "-march=native", so a cache shared
         # between machines could hand back objects built for another CPU.
         "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DGGML_CCACHE=OFF", "-DLLAMA_BUILD_TESTS=OFF",
         "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_APP=OFF",
         "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF"], stdout=subprocess.DEVNULL)
    run(["ninja", "-C", os.path.join(LLAMA, "build")] + TARGETS)


def ensure_models(nanovllm, preset, arch="qwen3", extra_types=()):
    name = preset if arch == "qwen3" else f"{arch}-{preset}"
    mdir = os.path.join(CACHE, "models", name)
    if not os.path.exists(os.path.join(mdir, "config.json")):
        env = dict(os.environ, NANOVLLM_SOURCE_DIR=ROOT)
        run([nanovllm, "make-model", "--arch", arch, "--preset", preset, "--dtype", "bf16",
             "--seed", "0", "--out", mdir], env=env)
    if not os.path.exists(os.path.join(mdir, "tokenizer.json")):
        raise SystemExit(f"{mdir} has no tokenizer.json (llama.cpp needs a vocabulary): run "
                         "`make deps` for the npm tokenizer packages, delete the folder, retry")
    ggufs = {}
    bf16 = os.path.join(CACHE, "models", f"{name}-bf16.gguf")
    if not os.path.exists(bf16):
        env = dict(os.environ, PYTHONPATH=os.path.join(LLAMA, "gguf-py"))
        run(["/usr/bin/python3", os.path.join(ROOT, "bench", "peer", "hf_to_gguf.py"), mdir, bf16],
            env=env)
    ggufs["bf16"] = bf16
    for t in ("Q8_0", "Q4_0") + tuple(extra_types):
        path = os.path.join(CACHE, "models", f"{name}-{t.lower()}.gguf")  # per model (was shared)
        if not os.path.exists(path):
            run([os.path.join(LLAMA_BIN, "llama-quantize"), bf16, path, t],
                stdout=subprocess.DEVNULL)
        ggufs[t] = path
    return mdir, ggufs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(cmd, port):
    """Starts a server, waits for /health, yields its URL, stops it. Its log goes to a temporary
    file, never a pipe: nobody reads a pipe while the load runs, and a server that fills one
    (64 KiB of llama-server's per-request lines) blocks in write() and stops serving."""
    log("+ " + " ".join(map(str, cmd)))
    with tempfile.TemporaryFile(mode="w+") as errf:
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=errf, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            serve_load.wait_healthy(url, proc)
            yield url
        except RuntimeError as e:
            proc.kill()
            proc.wait()
            errf.seek(0)
            raise SystemExit(f"`{' '.join(map(str, cmd))}`: {e}\n{errf.read()[-3000:]}")
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def served(cmd, port):
    """The 32-client load against a server started for it."""
    with running_server(cmd, port) as url:
        return serve_load.run_load(url, clients=SERVER_CLIENTS)["output_tokens_per_s"]


def default_kv_cache_bytes():
    """The engine's own default budget on the CPU: 20% of the available RAM."""
    with open("/proc/meminfo") as f:
        avail = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("MemAvailable:"))
    return int(avail * 0.2)


def ours(nanovllm, mdir, flags, workload, threads, kv_dtype, bp=None):
    if workload == "benchpy":
        cmd = [nanovllm, "bench", "--model", mdir, "--num-seqs", bp["seqs"], "--json", "--no-progress",
               "--threads", threads, "--kv-cache-dtype", kv_dtype, "--kv-cache-bytes", bp["kv_bytes"]] + flags
        j = json.loads([ln for ln in out(cmd, timeout=8 * 3600).splitlines() if ln.startswith("{")][-1])
        if (j["prompt_tokens"], j["expected_output_tokens"]) != (bp["prompt_tokens"], bp["output_tokens"]):
            raise SystemExit(f"nanovllm bench ran another workload: {j['prompt_tokens']} / "
                             f"{j['expected_output_tokens']} tokens, expected {bp['prompt_tokens']} / "
                             f"{bp['output_tokens']}")
        log(f"  nanovllm benchpy: {j['output_tokens_per_s']:.1f} tok/s, {j['seconds']:.0f} s, "
            f"{j['num_kv_blocks']} blocks of {j['block_size']}, {j['preemptions']} preemptions")
        return j["output_tokens_per_s"]
    if workload == "server32":
        port = free_port()
        return served([nanovllm, "serve", "--model", mdir, "--served-model-name", "bench", "--port",
                       port, "--threads", threads, "--kv-cache-dtype", kv_dtype] + flags, port)
    shape = {"decode1": (1, 4, 128), "prefill512": (1, 512, 1), "b4": (4, 128, 128),
             "b64": (64, 128, 128)}[workload]
    n, pin, pout = shape
    cmd = [nanovllm, "bench", "--model", mdir, "--num-seqs", n, "--min-input-len", pin,
           "--max-input-len", pin, "--min-output-len", pout, "--max-output-len", pout, "--json",
           "--no-progress", "--threads", threads, "--kv-cache-dtype", kv_dtype] + flags
    j = json.loads([ln for ln in out(cmd).splitlines() if ln.startswith("{")][-1])
    return j["prefill_tokens_per_s"] if workload == "prefill512" else j["decode_tokens_per_s"]


def peer_benchpy(gguf, threads, bp):
    port = free_port()
    ctx = bp["peer_ctx"]
    cmd = [os.path.join(LLAMA_BIN, "llama-server"), "-m", gguf, "-t", threads, "-tb", threads, "-np",
           bp["slots"], "-kvu", "-c", ctx, "-b", "2048", "-ub", "512", "--no-webui", "--alias", "bench",
           "--host", "127.0.0.1", "--port", port]
    with running_server(cmd, port) as url:
        t0 = time.time()

        def progress(done, total):  # a line per tenth, so a long run shows it is moving
            if done * 10 // total != (done - 1) * 10 // total:
                log(f"  llama-server benchpy: {done}/{total} requests done, {time.time() - t0:.0f} s")
        # A failed request raises RuntimeError: running_server reports it with the server's log.
        # Temperature alone, as bench.py: llama-server's own top-k 40 / top-p 0.95 / min-p 0.05 off.
        r = serve_load.run_workload(url, bp["prompts"], bp["max_tokens"], bp["slots"], ctx, progress=progress,
                                    sampling={"top_k": 0, "top_p": 1.0, "min_p": 0.0})
    log(f"  llama-server benchpy: {r['output_tokens_per_s']:.1f} tok/s, {r['wall_s']:.0f} s, "
        f"{ctx} KV tokens, {bp['slots']} slots")
    return r["output_tokens_per_s"]


def peer(gguf, workload, threads, bp=None):
    if workload == "benchpy":
        return peer_benchpy(gguf, threads, bp)
    if workload == "server32":
        port = free_port()
        # One unified KV buffer for 32 slots of 128 + 128 tokens (+ headroom), as llama-server
        # itself sizes it when -np is auto.
        return served([os.path.join(LLAMA_BIN, "llama-server"), "-m", gguf, "-t", threads, "-tb",
                       threads, "-np", SERVER_CLIENTS, "-kvu", "-c", SERVER_CLIENTS * 288, "-b", "2048",
                       "-ub", "512", "--no-webui", "--alias", "bench", "--host", "127.0.0.1", "--port", port],
                      port)
    if workload in ("decode1", "prefill512"):
        pn = ["-p", "0", "-n", "128"] if workload == "decode1" else ["-p", "512", "-n", "0"]
        text = out([os.path.join(LLAMA_BIN, "llama-bench"), "-m", gguf, "-t", threads, "-r", "1",
                    "-o", "json"] + pn)
        start = text.index("[")
        return json.loads(text[start:text.rindex("]") + 1])[0]["avg_ts"]
    b = 4 if workload == "b4" else 64
    text = out([os.path.join(LLAMA_BIN, "llama-batched-bench"), "-m", gguf, "-t", threads,
                "-tb", threads, "-c", str(b * 256 + 256), "-b", "2048", "-ub", "512", "-npp", "128",
                "-ntg", "128", "-npl", str(b), "--output-format", "jsonl"])
    rows = [json.loads(ln) for ln in text.splitlines() if ln.startswith("{")]
    return rows[-1]["speed_tg"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="qwen3-0.6b")
    ap.add_argument("--arch", default="qwen3", choices=["qwen3", "qwen3_moe"],
                    help="qwen3_moe with --preset qwen3-moe-2b: the MoE comparison (issue 28)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternated rounds; 0: only build llama.cpp and write the models, then exit")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                    help=f"comma-separated, of {', '.join(WORKLOADS)} (default {DEFAULT_WORKLOADS})")
    ap.add_argument("--benchpy-seqs", type=int, default=256,
                    help="benchpy: sequences (bench.py's draws for this count; 256 = bench.py itself)")
    ap.add_argument("--benchpy-slots", type=int, default=64, help="benchpy: llama-server's parallel slots")
    ap.add_argument("--kv-cache-bytes", type=int, default=0,
                    help="benchpy: the KV cache bytes of both engines (default: 20%% of the available "
                         "RAM, nanovllm's own default)")
    ap.add_argument("--nanovllm", default=os.path.join(ROOT, "build", "nanovllm"))
    ap.add_argument("--kv-cache-dtype", default="bf16", choices=["bf16", "f32", "int8"],
                    help="nanovllm's KV cache (default bf16: 16-bit like llama.cpp's default f16 cache)")
    ap.add_argument("--formats", default="bf16,int8,int4",
                    help="bit widths to run (each against llama.cpp's: bf16, Q8_0, Q4_0)")
    ap.add_argument("--gguf", action="store_true",
                    help="both engines read the identical GGUF file per type (issue 29): nanovllm "
                         "--model FILE.gguf with --quantization auto; --formats are then ggml types "
                         "(default Q8_0,Q4_K_M); TYPE:SCHEME runs nanovllm on that file with "
                         "--quantization SCHEME instead (e.g. Q8_0:int8, the per-row re-quantization)")
    ap.add_argument("--json", help="also write the raw numbers here")
    a = ap.parse_args()
    workloads = a.workloads.split(",")
    if a.gguf and a.formats == "bf16,int8,int4":
        a.formats = "Q8_0,Q4_K_M"
    fmts = a.formats.split(",")
    pair = {"bf16": "bf16", "int8": "Q8_0", "int4": "Q4_0"}
    if a.gguf:  # same file on both sides; TYPE:SCHEME = that file, nanovllm --quantization SCHEME
        pair = {f: f.split(":")[0] for f in fmts}
    if any(f not in pair for f in fmts):
        raise SystemExit(f"--formats: expected some of {', '.join(pair)}")
    ours_fmts = {f: ((["--quantization", f.split(":")[1]] if ":" in f else []) if a.gguf else OURS[f])
                 for f in fmts}
    peer_fmts = list(dict.fromkeys(pair[f] for f in fmts))  # once per file
    for w in workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"unknown workload {w!r} (expected {', '.join(WORKLOADS)})")
    if a.rounds < 0:
        raise SystemExit(f"--rounds {a.rounds}: expected 0 (set-up only) or more")
    if not os.path.exists(a.nanovllm):
        raise SystemExit(f"{a.nanovllm} not found: build nanovllm first")
    ensure_llama()
    mdir, ggufs = ensure_models(a.nanovllm, a.preset, a.arch,
                                [f for f in peer_fmts if a.gguf and f not in ("bf16", "Q8_0", "Q4_0")])
    if a.rounds == 0:  # set-up only: nothing measured, no table
        print(f"llama.cpp: {LLAMA_BIN}\nmodel: {mdir}\n" +
              "\n".join(f"GGUF {k}: {v}" for k, v in ggufs.items()))
        return
    bp = None
    if "benchpy" in workloads:
        sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
        import bench_workload  # the same draws as `nanovllm bench` (and bench.py)
        prompts, max_tokens = bench_workload.make_workload(num_seqs=a.benchpy_seqs)
        with open(os.path.join(mdir, "config.json")) as f:
            cfg = json.load(f)
        kv_bytes = a.kv_cache_bytes or default_kv_cache_bytes()
        bp = {"seqs": a.benchpy_seqs, "slots": a.benchpy_slots, "kv_bytes": kv_bytes,
              "prompts": prompts, "max_tokens": max_tokens,
              "prompt_tokens": sum(len(p) for p in prompts), "output_tokens": sum(max_tokens),
              "peer_ctx": kv_bytes // bench_workload.kv_bytes_per_token(cfg, 2)}  # llama.cpp's f16 cache
        log(f"benchpy: {a.benchpy_seqs} sequences, {bp['prompt_tokens']} prompt / {bp['output_tokens']} "
            f"output tokens; KV {kv_bytes / 2**30:.2f} GiB each (llama.cpp: {bp['peer_ctx']} tokens)")
    load0 = uptime()
    t0 = time.time()
    res = {w: {} for w in workloads}  # workload -> engine label -> [tok/s per round]
    for r in range(a.rounds):
        for w in workloads:
            for fmt, flags in ours_fmts.items():
                model = ggufs[pair[fmt]] if a.gguf else mdir
                res[w].setdefault(f"nanovllm {fmt}", []).append(ours(a.nanovllm, model, flags, w, a.threads,
                                                                        a.kv_cache_dtype, bp))
            for fmt in peer_fmts:
                res[w].setdefault(f"llama.cpp {fmt}", []).append(peer(ggufs[fmt], w, a.threads, bp))
            log(f"round {r + 1}/{a.rounds} {w}: " + ", ".join(
                f"{k} {v[-1]:.1f}" for k, v in res[w].items()))
    load1 = uptime()
    med = {w: {k: statistics.median(v) for k, v in d.items()} for w, d in res.items()}
    cols = [f"nanovllm {f}" for f in ours_fmts] + [f"llama.cpp {f}" for f in peer_fmts]
    print(f"\nmodel: random {a.arch} {a.preset} (bf16 weights, GGUF converted); KV cache: nanovllm "
          f"{a.kv_cache_dtype}, llama.cpp f16 (its default); threads {a.threads}; "
          f"{a.rounds} rounds alternated, medians; load (1/5/15 min) before {' '.join(load0)}, "
          f"after {' '.join(load1)}; {time.time() - t0:.0f} s\n")
    if bp:
        print(f"benchpy: {bp['seqs']} sequences ({bp['prompt_tokens']} prompt / {bp['output_tokens']} output "
              f"tokens), KV cache {bp['kv_bytes']} bytes each (llama.cpp -c {bp['peer_ctx']}, "
              f"{bp['slots']} slots)\n")
    if a.gguf:  # same file: one ratio per type
        print("same GGUF file on both sides; nanovllm --quantization auto (TYPE:SCHEME: that scheme)\n")
        print("| workload | " + " | ".join(cols) + " | " + " | ".join(f"{f} ratio" for f in fmts) + " |")
        print("|---" * (len(cols) + len(fmts) + 1) + "|")
        for w in workloads:
            m = med[w]
            print(f"| {WORKLOADS[w]} | " + " | ".join(f"{m[c]:.1f}" for c in cols) + " | " +
                  " | ".join(f"{m[f'nanovllm {f}'] / m[f'llama.cpp {pair[f]}']:.2f}x" for f in fmts) + " |")
    else:
        print_table(med, workloads, cols)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"arch": a.arch, "preset": a.preset, "threads": a.threads, "rounds": a.rounds,
                       "gguf": a.gguf, "formats": fmts,
                       "kv_cache_dtype": a.kv_cache_dtype, "load_before": load0,
                       "benchpy": None if bp is None else {k: bp[k] for k in (
                           "seqs", "slots", "kv_bytes", "peer_ctx", "prompt_tokens", "output_tokens")},
                       "load_after": load1, "runs": res, "medians": med}, f, indent=1)


def print_table(med, workloads, cols):
    print("| workload | " + " | ".join(cols) + " | int4 / Q4_0 | int8 / Q8_0 | bf16 / bf16 | best / best |")
    print("|---" * (len(cols) + 5) + "|")
    for w in workloads:
        m = med[w]
        best_ours = max(m[c] for c in cols if c.startswith("nanovllm"))
        best_peer = max(m[c] for c in cols if c.startswith("llama.cpp"))
        def ratio(o, p):
            return f"{m[o] / m[p]:.2f}x" if o in m and p in m else "-"
        ratios = [ratio("nanovllm int4", "llama.cpp Q4_0"), ratio("nanovllm int8", "llama.cpp Q8_0"),
                  ratio("nanovllm bf16", "llama.cpp bf16"), f"{best_ours / best_peer:.2f}x"]
        print(f"| {WORKLOADS[w]} | " + " | ".join(f"{m[c]:.1f}" for c in cols) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
