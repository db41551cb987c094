"""CPU-machine tests of gpu-check's pure logic (run by ctest as gpucheck_helpers under
/usr/bin/python3): the comparison rules, the bench.py workload and roofline, the summary, the
.deb extractor, and the shell scripts' syntax."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_workload  # noqa: E402
import deb_extract  # noqa: E402
import gpu_summary  # noqa: E402
import logits_compare as lc  # noqa: E402
import ncu_top  # noqa: E402
import step_split  # noqa: E402
import nv_cli  # noqa: E402


def logits_rows(rng, rows=16, vocab=50):
    return rng.normal(0, 3, size=(rows, vocab))


class CompareLogits(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(5)
        self.ref = logits_rows(self.rng)

    def test_identical(self):
        r = lc.compare_logits(self.ref.copy(), self.ref)
        self.assertTrue(r["ok"])
        self.assertEqual(r["max_rel_err"], 0.0)
        self.assertEqual(r["top1_agree"], 16)

    def test_noise_within_tolerance_passes_and_over_fails(self):
        scale = np.abs(self.ref).max()
        small = self.ref + 0.5e-2 * scale * np.sign(self.rng.normal(size=self.ref.shape)) * 0.9
        r = lc.compare_logits(small, self.ref, rel_tol=2e-2, tie_frac=0)
        self.assertLessEqual(r["max_rel_err"], 2e-2)
        big = self.ref.copy()
        big[3, 7] += 0.05 * scale
        r = lc.compare_logits(big, self.ref, rel_tol=2e-2)
        self.assertFalse(r["ok"])
        self.assertAlmostEqual(r["max_rel_err"], 0.05, places=6)

    def test_near_tie_flip_is_explained(self):
        ref = self.ref.copy()
        a, b = ref[2].argmax(), (ref[2].argmax() + 1) % ref.shape[1]
        ref[2, b] = ref[2, a] - 1e-3  # reference top-2 within 1e-3
        test = ref.copy()
        test[2, b] = ref[2, a] + 1e-3  # the test picks the runner-up
        r = lc.compare_logits(test, ref, rel_tol=2e-2, tie_eps=0.01)
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["top1_agree"], 15)
        self.assertEqual(len(r["ties"]), 1)
        self.assertEqual(r["ties"][0]["row"], 2)
        self.assertAlmostEqual(r["ties"][0]["gap"], 1e-3, places=9)

    def test_flip_without_tie_is_unexplained(self):
        ref = self.ref.copy()
        a, b = ref[4].argmax(), (ref[4].argmax() + 1) % ref.shape[1]
        ref[4, b] = ref[4, a] - 1.0
        test = ref.copy()
        test[4, b] = ref[4, a] + 0.01  # flipped although the reference margin is 1.0
        r = lc.compare_logits(test, ref, rel_tol=1.0, tie_eps=0.1)
        self.assertFalse(r["ok"])
        self.assertEqual([u["row"] for u in r["unexplained"]], [4])
        self.assertEqual(r["unexplained"][0]["test_top1"], b)

    def test_default_tie_eps_is_a_fraction_of_the_scale(self):
        r = lc.compare_logits(self.ref, self.ref, tie_frac=1e-2)
        self.assertAlmostEqual(r["tie_eps"], 1e-2 * np.abs(self.ref).max())

    def test_nonfinite_and_shape_errors(self):
        bad = self.ref.copy()
        bad[0, 0] = np.nan
        r = lc.compare_logits(bad, self.ref)
        self.assertFalse(r["ok"])
        self.assertEqual(r["test_nonfinite"], 1)
        r = lc.compare_logits(self.ref[:3], self.ref)
        self.assertFalse(r["ok"])
        self.assertIn("shape", r["error"])
        self.assertIn("FAIL", lc.summary_line("x", r))


def gen(tokens, margins):
    return {"token_ids": tokens,
            "logprobs": [{"logprob": -0.1, "top": [{"token_id": t, "logprob": -0.1},
                                                   {"token_id": t + 1, "logprob": -0.1 - m}]}
                         for t, m in zip(tokens, margins)]}


class CompareGreedy(unittest.TestCase):
    def test_identical(self):
        a = [gen([1, 2, 3], [1, 1, 1]), gen([4, 5], [1, 1])]
        r = lc.compare_greedy(a, [dict(x) for x in a], 0.05)
        self.assertTrue(r["ok"])
        self.assertEqual(r["identical"], 2)

    def test_divergence_at_near_tie_passes(self):
        ref = gen([1, 2, 3, 4], [1.0, 1.0, 0.01, 1.0])
        test = gen([1, 2, 9, 9], [1, 1, 1, 1])
        r = lc.compare_greedy([ref], [test], 0.05)
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["sequences"][0]["same_prefix"], 2)
        self.assertAlmostEqual(r["sequences"][0]["ref_top2_margin"], 0.01)
        self.assertIn("diverge", lc.summary_line("g", r))

    def test_divergence_without_tie_fails(self):
        r = lc.compare_greedy([gen([1, 2], [1.0, 1.0])], [gen([1, 3], [1, 1])], 0.05)
        self.assertFalse(r["ok"])

    def test_divergence_without_logprobs_fails(self):
        r = lc.compare_greedy([{"token_ids": [1, 2]}], [{"token_ids": [1, 3]}], 0.05)
        self.assertFalse(r["ok"])
        self.assertIn("logprobs", r["sequences"][0]["error"])

    def test_length_mismatch_fails(self):
        r = lc.compare_greedy([gen([1, 2], [1, 1])], [gen([1], [1])], 0.05)
        self.assertFalse(r["ok"])
        r = lc.compare_greedy([gen([1], [1])], [], 0.05)
        self.assertFalse(r["ok"])


QWEN3_06B = {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
             "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True}


class Workload(unittest.TestCase):
    def test_bench_py_totals(self):
        # nano-vLLM's bench.py workload as recorded in issue 13 and docs/perf.md.
        prompts, max_tokens = bench_workload.make_workload()
        self.assertEqual(len(prompts), 256)
        self.assertEqual(sum(map(len, prompts)), 142827)
        self.assertEqual(sum(max_tokens), 133966)

    def test_qwen3_weights_match_the_model_card(self):
        # Qwen3-0.6B's model card: 0.44B non-embedding parameters (0.6B with the embedding).
        params = bench_workload.weight_bytes(QWEN3_06B) / 2
        non_embedding = params - 151936 * 1024
        self.assertAlmostEqual(non_embedding / 1e9, 0.44, delta=0.005)
        self.assertEqual(bench_workload.kv_bytes_per_token(QWEN3_06B), 28 * 8 * 128 * 2 * 2)

    def test_roofline_by_hand(self):
        cfg = {"model_type": "llama", "hidden_size": 2, "intermediate_size": 3,
               "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
               "head_dim": 2, "vocab_size": 5}
        # layer: qkv 2*6 + o 2*2 + mlp 3*2*3 + norms 2*2 = 38; + final norm 2 + head 10 -> 100 B
        self.assertEqual(bench_workload.weight_bytes(cfg), 100)
        self.assertEqual(bench_workload.kv_bytes_per_token(cfg), 8)
        prompts, max_tokens = [[0] * 3, [0] * 5], [1, 2]
        # The prefill samples both first tokens; one decode step: the second sequence's
        # token 2 over its 5 + 1 tokens: 100 + 6 * 8 = 148.
        self.assertEqual(bench_workload.decode_bytes(cfg, prompts, max_tokens), 148)
        self.assertAlmostEqual(bench_workload.roofline_tokens_per_s(cfg, prompts, max_tokens, 148), 3.0)

    def test_h100_roofline_is_near_issue_13s_estimate(self):
        # Issue 13 estimates ~26k output tok/s on an H100 (~3.35 TB/s datasheet, less measured).
        prompts, max_tokens = bench_workload.make_workload()
        r = bench_workload.roofline_tokens_per_s(QWEN3_06B, prompts, max_tokens, 3.0e12)
        self.assertTrue(24e3 < r < 30e3, r)


class Summary(unittest.TestCase):
    def test_test_counts(self):
        self.assertEqual(gpu_summary.test_counts("100% tests passed, 0 tests failed out of 12\n"),
                         "12/12 tests passed")
        self.assertEqual(gpu_summary.test_counts("90% tests passed, 1 tests failed out of 10"),
                         "9/10 tests passed")
        g = "[  PASSED  ] 40 tests.\n[  SKIPPED ] 2 tests, listed below:\n[  FAILED  ] 3 tests, listed below:\n"
        self.assertEqual(gpu_summary.test_counts(g), "40 passed, 3 failed, 2 skipped")
        self.assertIsNone(gpu_summary.test_counts("nothing"))

    def test_build_table_and_headline(self):
        with tempfile.TemporaryDirectory() as d:
            steps = os.path.join(d, "steps.tsv")
            with open(steps, "w") as f:
                f.write("build\tPASS\t60\tdone\nbench\tPASS\t30\tok\nbench_candidates\tPASS\t30\tok\n"
                        "hf_bench\tPASS\t90\tok\nattention_bench\tPASS\t20\tok\ngpu_tests\tFAIL(1)\t5\tx\n")
            with open(os.path.join(d, "gpu_tests.log"), "w") as f:
                f.write("[  PASSED  ] 7 tests.\n[  FAILED  ] 1 test, listed below:\n")
            with open(os.path.join(d, "bench.json"), "w") as f:
                f.write("warm-up line\n" + json.dumps({"output_tokens_per_s": 10000.0, "output_tokens": 133966,
                                                      "seconds": 13.4, "num_seqs": 256}) + "\n")
            with open(os.path.join(d, "bench_candidates.json"), "w") as f:
                json.dump({"output_tokens_per_s": 11000.0, "output_tokens": 133966, "seconds": 12.2,
                           "num_seqs": 256}, f)
            with open(os.path.join(d, "hf_bench.json"), "w") as f:
                json.dump({"output_tokens_per_s": 2500.0, "engine": "transformers 5.17.0", "finished": 256,
                           "num_seqs": 256, "partial": False}, f)
            case = {"B": 256, "L": 1024, "D": 128, "read_pass_gbs": 3000.0,
                    "v1": {"attention_gbs": 2400.0, "ratio_vs_read_pass": 0.8},
                    "v2": {"attention_gbs": 2700.0, "ratio_vs_read_pass": 0.9}, "v2_speedup": 1.125}
            sweep = [{"B": 1, "v1_ratio_vs_read_pass": 0.05, "v2_ratio_vs_read_pass": 0.07},
                     {"B": 256, "v1_ratio_vs_read_pass": 0.8, "v2_ratio_vs_read_pass": 0.9}]
            with open(os.path.join(d, "attention_bench.json"), "w") as f:
                json.dump({"device": "NVIDIA H100", "read_pass_gbs": 3000.0, "spec_hbm_gbs": 3350.0,
                           "headline": case, "cases": [case], "batch_sweep": sweep}, f)
            mdir = os.path.join(d, "m")
            os.mkdir(mdir)
            with open(os.path.join(mdir, "config.json"), "w") as f:
                json.dump(QWEN3_06B, f)
            s = gpu_summary.build(steps, d, mdir)
            self.assertFalse(s["ok"])
            h = s["headline"]
            self.assertAlmostEqual(h["vs_transformers"], 4.0)
            prompts, max_tokens = bench_workload.make_workload()
            roof = bench_workload.roofline_tokens_per_s(QWEN3_06B, prompts, max_tokens, 3000e9)
            self.assertAlmostEqual(h["ratio_vs_roofline"], 10000.0 / roof)
            text = gpu_summary.table(s)
            self.assertIn("v1 2400 GB/s = 0.80, v2 2700 GB/s = 0.90 of the read pass", text)
            self.assertIn("ratio v1/v2 by batch: B1 0.05/0.07, B256 0.80/0.90", text)
            self.assertAlmostEqual(h["decode_attention_gbs"], 2400.0)
            self.assertAlmostEqual(h["decode_attention_v2_ratio_vs_read_pass"], 0.9)
            self.assertIn("7 passed, 1 failed", text)
            self.assertIn("10000 out tok/s", text)
            self.assertIn("11000 out tok/s with tc prefill (133966 tok, 12.2 s); 1.100x the defaults",
                          text)
            self.assertAlmostEqual(h["candidates_vs_defaults"], 1.1)


    def test_attention_bench_from_before_two_kernels(self):
        case = {"B": 256, "L": 1024, "D": 128, "attention_gbs": 2400.0, "ratio_vs_read_pass": 0.8,
                "read_pass_gbs": 3000.0}
        data = {"read_pass_gbs": 3000.0, "spec_hbm_gbs": 3350.0, "headline": case, "cases": [case]}
        self.assertEqual(gpu_summary.result_line("attention_bench", data, ""),
                         "B256 L1024 D128: v1 2400 GB/s = 0.80 of the read pass (3000 GB/s; spec 3350)")

    def test_resume_carries_passed_steps(self):
        """A second gpu-check call skips what PASSED in the first one and keeps its figures."""
        with tempfile.TemporaryDirectory() as d:
            first = {"steps": [
                {"name": "bench", "status": "PASS", "seconds": 31, "note": "ok", "result": "10000 out tok/s",
                 "data": {"output_tokens_per_s": 10000.0, "output_tokens": 133966, "seconds": 13.4,
                          "num_seqs": 256}},
                {"name": "hf_bench", "status": "TIMEOUT", "seconds": 90, "note": "x", "result": "x", "data": None},
                {"name": "gemm_bench", "status": "PASS", "seconds": 0, "note": "GPU_CHECK_SKIP", "result": "",
                 "data": None}]}
            prev = os.path.join(d, "prev.json")
            with open(prev, "w") as f:
                json.dump(first, f)
            self.assertEqual(gpu_summary.main(["--passed-in", prev, "--step", "bench"]), 0)
            self.assertEqual(gpu_summary.main(["--passed-in", prev, "--step", "hf_bench"]), 1)
            self.assertEqual(gpu_summary.main(["--passed-in", prev, "--step", "gemm_bench"]), 1)
            self.assertEqual(gpu_summary.main(["--passed-in", prev, "--step", "cpu_vs_cuda"]), 1)
            self.assertEqual(gpu_summary.main(["--passed-in", os.path.join(d, "nope"), "--step", "bench"]), 1)
            steps = os.path.join(d, "steps.tsv")
            with open(steps, "w") as f:
                f.write(f"bench\tPASS\t0\t{gpu_summary.EARLIER}\nhf_bench\tPASS\t80\tok\n")
            with open(os.path.join(d, "hf_bench.json"), "w") as f:
                json.dump({"output_tokens_per_s": 2500.0, "engine": "transformers", "finished": 256,
                           "num_seqs": 256, "partial": False}, f)
            s = gpu_summary.build(steps, d, d, prev)
            self.assertTrue(s["ok"])
            self.assertAlmostEqual(s["headline"]["vs_transformers"], 4.0)
            self.assertIn("(earlier call, 31 s) 10000 out tok/s", gpu_summary.table(s))


def ar_archive(members):
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, data in members:
        h = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        out.write(h + data + (b"\n" if len(data) % 2 else b""))
    return out.getvalue()


def tar_xz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as t:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class DebExtract(unittest.TestCase):
    def test_matches_dpkg_deb(self):
        if not shutil.which("dpkg-deb"):
            self.skipTest("dpkg-deb not installed")
        with tempfile.TemporaryDirectory() as d:
            pkg = os.path.join(d, "pkg")
            os.makedirs(os.path.join(pkg, "DEBIAN"))
            os.makedirs(os.path.join(pkg, "usr/include/sub"))
            with open(os.path.join(pkg, "DEBIAN/control"), "w") as f:
                f.write("Package: nvtest\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@y>\n"
                        "Description: test\n")
            with open(os.path.join(pkg, "usr/include/sub/a.h"), "w") as f:
                f.write("#define A 1\n")
            os.symlink("sub/a.h", os.path.join(pkg, "usr/include/a_link.h"))
            deb = os.path.join(d, "nvtest.deb")
            subprocess.run(["dpkg-deb", "-Zxz", "--build", pkg, deb], check=True, capture_output=True)
            ours, theirs = os.path.join(d, "ours"), os.path.join(d, "theirs")
            deb_extract.extract(deb, ours)
            subprocess.run(["dpkg-deb", "-x", deb, theirs], check=True)

            def listing(root):
                out = {}
                for dp, dn, fn in os.walk(root):
                    for n in dn + fn:
                        p = os.path.join(dp, n)
                        rel = os.path.relpath(p, root)
                        out[rel] = (os.readlink(p) if os.path.islink(p) else
                                    open(p).read() if os.path.isfile(p) else "dir")
                return out

            self.assertEqual(listing(ours), listing(theirs))
            self.assertEqual(listing(ours)["usr/include/a_link.h"], "sub/a.h")

    def test_rejects_bad_archives(self):
        with self.assertRaises(ValueError):
            list(deb_extract.ar_members(b"not an archive"))
        with self.assertRaises(ValueError):  # a member running past the end
            list(deb_extract.ar_members(ar_archive([("x", b"abcd")])[:-2]))
        with tempfile.TemporaryDirectory() as d:
            evil = os.path.join(d, "evil.deb")
            with open(evil, "wb") as f:
                f.write(ar_archive([("debian-binary", b"2.0\n"),
                                    ("data.tar.xz", tar_xz([("../escape.txt", b"x")]))]))
            with self.assertRaises(ValueError):
                deb_extract.extract(evil, os.path.join(d, "out"))
            self.assertFalse(os.path.exists(os.path.join(d, "escape.txt")))
            nodata = os.path.join(d, "nodata.deb")
            with open(nodata, "wb") as f:
                f.write(ar_archive([("debian-binary", b"2.0\n")]))
            self.assertEqual(deb_extract.main(["x", os.path.join(d, "o"), nodata]), 1)


class CliSelfTest(unittest.TestCase):
    """cpu_vs_cuda's pipeline with the CPU backend on both sides, through the built CLI
    (NANOVLLM_BIN, set by ctest) on stories260K: must find identical logits and tokens. Guards
    the CLI's logits / generate --logprobs output that gpu-check reads."""

    def test_cpu_against_itself(self):
        nv = os.environ.get("NANOVLLM_BIN", "")
        data = os.environ.get("NANOVLLM_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
        model = os.path.join(data, "models", "stories260K-hf")
        if not os.access(nv, os.X_OK) or not os.path.exists(os.path.join(model, "config.json")):
            self.skipTest("needs NANOVLLM_BIN and ../shared/data (run through ctest)")
        import cpu_vs_cuda
        r = cpu_vs_cuda.check_model(nv, model, test_device="cpu")
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["logits"]["max_rel_err"], 0.0)
        self.assertEqual(r["logits"]["rows"], 64)
        self.assertEqual(r["greedy"]["identical"], 4)
        self.assertTrue(all(s["tokens"] == 32 for s in r["greedy"]["sequences"]))


    def test_determinism_script_on_cpu(self):
        """determinism.py with the CPU backend: every variant (reversed batch, alone, chunked
        mixed) equals the batch bitwise, as docs/determinism.md promises there for bf16 weights
        (f32 weights in steps above 64 rows go to BLAS and are outside the contract)."""
        nv = os.environ.get("NANOVLLM_BIN", "")
        data = os.environ.get("NANOVLLM_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
        model = os.path.join(data, "models", "stories260K-hf-bf16")
        if not os.access(nv, os.X_OK) or not os.path.exists(os.path.join(model, "config.json")):
            self.skipTest("needs NANOVLLM_BIN and ../shared/data (run through ctest)")
        import determinism
        # The exact CPU linears (test_determinism.py says why: oneDNN's bf16 path on AMX / Zen 4
        # is outside the contract); the CLI runs inherit the variable.
        os.environ["NANOVLLM_LINEAR_PATH"] = "streaming"
        try:
            r = determinism.check_model(nv, model, "cpu", expect_invariant=True)
        finally:
            del os.environ["NANOVLLM_LINEAR_PATH"]
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["reversed"]["sequences"], 8)
        self.assertEqual(r["alone"]["sequences"], 2)
        # and the comparison can fail: a changed logprob or token is seen
        base = {0: ([1, 2, 3], [-0.5, -0.25, -1.0])}
        self.assertEqual(determinism.diff(base, {0: ([1, 2, 4], [-0.5, -0.25, -1.0])})["first_diff"], 2)
        self.assertGreater(determinism.diff(base, {0: ([1, 2, 3], [-0.5, -0.3, -1.0])})["max_logprob_diff"], 0)


class CpuVsCudaGate(unittest.TestCase):
    """Only stories260K-like (real-weight) models decide cpu_vs_cuda; random ones are figures."""

    def test_gate_decides_and_figures_never_fail(self):
        import cpu_vs_cuda
        res = {"stories260K-hf": {"ok": True}, "qwen3-0.6b-bf16": {"ok": False}}
        v = cpu_vs_cuda.decide(res, ["stories260K"])
        self.assertTrue(v["ok"])
        self.assertEqual(v["gates"], ["stories260K-hf"])
        self.assertFalse(v["models"]["qwen3-0.6b-bf16"]["gate"])
        res = {"stories260K-hf": {"ok": False}, "stories260K-qwen2-hf": {"ok": True}}
        self.assertFalse(cpu_vs_cuda.decide(res, ["stories260K"])["ok"])
        v = cpu_vs_cuda.decide({"qwen3-0.6b-bf16": {"ok": True}}, ["stories260K"])
        self.assertFalse(v["ok"])
        self.assertEqual(v["gates"], [])

    def test_gate_flag(self):
        import nv_cli
        a = nv_cli.parse_args(True, gate=True, argv=["nv", "m1", "m2", "--json-out", "x", "--gate", "m1"])
        self.assertEqual((a.models, a.gate), (["m1", "m2"], ["m1"]))


FAKE_GTEST = """#!%s
# A stand-in for gpu_tests: two small suites, one big parameterized one (split by case prefix).
import os, signal, sys
big = [f"attention_{i}" for i in range(30)] + [f"rmsnorm_{i}" for i in range(20)]
if "--gtest_list_tests" in sys.argv:
    print("Good.\\n  A\\n  B\\nBad.\\n  C\\nCuda/Conf.")
    for c in big:
        print(f"  Case/{c}  # GetParam() = {c}")
    sys.exit(0)
f = next(a for a in sys.argv if a.startswith("--gtest_filter="))[15:]
if "rmsnorm_3" in f:
    os.kill(os.getpid(), signal.SIGSEGV)  # a device fault takes the process down
if f.startswith("Bad."):
    print("[  FAILED  ] Bad.C (3 ms)\\n[  PASSED  ] 0 tests.\\n[  FAILED  ] 1 test, listed below:\\n[  FAILED  ] Bad.C")
    sys.exit(1)
n = f.count(":") + 1 if not f.endswith(".*") else 2
print(f"[  PASSED  ] {n} tests.")
"""
FAKE_SANITIZER = """#!/bin/sh
# compute-sanitizer --tool memcheck --log-file FILE BINARY --gtest_filter=...
echo "========= Invalid __global__ read of size 4 ($6)" > "$4"
"""


class GpuSuiteRunner(unittest.TestCase):
    """run_gpu_suites.py: one process per suite (the big one split by case prefix), a crash or a
    failure fails only its unit, and the first bad unit is rerun under the sanitizer."""

    def test_units_crash_and_sanitizer(self):
        import contextlib
        import run_gpu_suites as rs
        with tempfile.TemporaryDirectory() as d:
            binary, san = os.path.join(d, "gpu_tests"), os.path.join(d, "compute-sanitizer")
            with open(binary, "w") as f:
                f.write(FAKE_GTEST % sys.executable)
            with open(san, "w") as f:
                f.write(FAKE_SANITIZER)
            os.chmod(binary, 0o755)
            os.chmod(san, 0o755)
            self.assertEqual([u[0] for u in rs.units(rs.list_tests(binary))],
                             ["Good", "Bad", "Cuda/Conf:attention", "Cuda/Conf:rmsnorm"])
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = rs.main([binary, "--log-dir", os.path.join(d, "logs"), "--sanitizer", san])
            text = out.getvalue()
            self.assertEqual(rc, 1)
            # The crash in the rmsnorm unit did not take the attention unit (30 tests) with it.
            self.assertIn("Cuda/Conf:attention: 30 passed, 0 failed, ok", text)
            self.assertIn("Cuda/Conf:rmsnorm: 0 passed, 0 failed, CRASHED", text)
            self.assertIn("[  PASSED  ] 32 tests.", text)  # Good (2) + attention (30)
            self.assertIn("[  FAILED  ] 2 tests, listed below:", text)
            self.assertIn("[  FAILED  ] Bad.C", text)
            # The first bad unit (Bad) went to the sanitizer, with its failed test only.
            self.assertIn("Invalid __global__ read of size 4 (--gtest_filter=Bad.C)", text)
            import gpu_summary
            self.assertEqual(gpu_summary.test_counts(text), "32 passed, 2 failed")


class NcuTop(unittest.TestCase):
    CSV = (
        "bench output line\n==PROF== Connected to process 123\n"
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'
        '"0","1","nanovllm","h","void decode_v2_kernel<bf16, 128, 2>(AttentionArgs, float *)","1","7",'
        '"(128, 1, 1)","(8, 4, 256)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,000,000"\n'
        '"0","1","nanovllm","h","void decode_v2_kernel<bf16, 128, 2>(AttentionArgs, float *)","1","7",'
        '"(128, 1, 1)","(8, 4, 256)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","0"\n'
        '"0","1","nanovllm","h","void decode_v2_kernel<bf16, 128, 2>(AttentionArgs, float *)","1","7",'
        '"(128, 1, 1)","(8, 4, 256)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,000"\n'
        '"1","1","nanovllm","h","sm90_xmma_gemm_bf16(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0",'
        '"Command line profiler metrics","gpu__time_duration.sum","usecond","3"\n'
        '"1","1","nanovllm","h","sm90_xmma_gemm_bf16(Params)","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0",'
        '"Command line profiler metrics","dram__bytes_read.sum","Mbyte","6"\n'
        '"2","1","nanovllm","h","void decode_v2_kernel<bf16, 128, 2>(AttentionArgs, float *)","1","7",'
        '"(128, 1, 1)","(8, 4, 256)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1000"\n')

    def test_groups_by_kernel_and_scales_units(self):
        s = ncu_top.summarize(ncu_top.parse_csv(self.CSV))
        self.assertEqual(s["launches"], 3)
        self.assertAlmostEqual(s["total_us"], 5.0)
        gemm, dec = s["kernels"]
        self.assertEqual(gemm["name"], "sm90_xmma_gemm_bf16")
        self.assertAlmostEqual(gemm["share"], 0.6)
        self.assertAlmostEqual(gemm["dram_gbs"], 2000.0)  # 6 MB in 3 us
        self.assertEqual(dec["name"], "void decode_v2_kernel<bf16, 128, 2>")
        self.assertEqual(dec["count"], 2)
        self.assertAlmostEqual(dec["mean_us"], 1.0)
        self.assertAlmostEqual(dec["dram_gbs"], 500.0)  # 1 MB in 2 us
        line = gpu_summary.result_line("ncu_top", s, "")
        self.assertIn("3 launches, 5 us: sm90_xmma_gemm_bf16 60% (2000 GB/s)", line)

    def test_no_header_or_unknown_unit_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "no ncu CSV header"):
            ncu_top.parse_csv("==PROF== nothing profiled\n")
        bad = self.CSV.replace('"usecond"', '"furlong"')
        with self.assertRaisesRegex(ValueError, "unknown unit 'furlong'"):
            ncu_top.parse_csv(bad)


class StepSplit(unittest.TestCase):
    def test_line_orders_phases_by_share(self):
        s = {"itl_ms": {"p50": 3.5}, "step_time_split": {"forward": 0.2, "sample": 0.7, "prepare": 0.1}}
        self.assertEqual(step_split.split_line(1, s), "bs1: itl p50 3.50 ms (sample 70%, forward 20%, prepare 10%)")
        self.assertEqual(step_split.split_line(256, {}), "bs256: no decode steps")
        self.assertEqual(gpu_summary.result_line("step_split", {"line": "x"}, ""), "x")


class GemmBench(unittest.TestCase):
    def test_decode_rows_give_the_speedup_range_by_m(self):
        d = {"ceiling_tflops": 806.0, "ceiling_ratio_vs_spec_peak": 0.81, "spec_bf16_tflops": 989.0,
             "peak_source": "datasheet",
             "decode": [{"M": 1, "skinny_speedup": 2.5}, {"M": 1, "skinny_speedup": 1.25},
                        {"M": 8, "skinny_speedup": 0.9}]}
        line = gpu_summary.result_line("gemm_bench", d, "")
        self.assertEqual(line, "ceiling 806 TFLOP/s = 0.81 of 989 (datasheet); "
                               "skinny/cuBLASLt speedup by M: M1 1.25-2.50x, M8 0.90-0.90x")
        del d["decode"]  # a file from before the decode rows
        self.assertEqual(gpu_summary.result_line("gemm_bench", d, ""), "ceiling 806 TFLOP/s = 0.81 of 989 (datasheet)")
        rows = {"rows": [{"batch": 1, "graph": {"step_ms": 1.0}, "eager": {"step_ms": 1.5}}]}
        self.assertEqual(gpu_summary.result_line("decode_step_skinny", rows, ""), "graph/eager bs1 1.00/1.50 ms (1.50x)")


class Misc(unittest.TestCase):
    def test_find_keys_and_prompts(self):
        j = {"stats": {"executor": "cuda-graph", "x": [{"graph_pool_bytes": 5}]}, "executor": "other"}
        self.assertEqual(nv_cli.find_keys(j, ("executor", "graph_pool_bytes")),
                         {"executor": "other", "graph_pool_bytes": 5})
        p = nv_cli.random_prompt(512, 100, seed=3)
        self.assertEqual(len(p), 100)
        self.assertTrue(all(3 <= t < 512 for t in p))
        self.assertEqual(p, nv_cli.random_prompt(512, 100, seed=3))

    def test_shell_scripts_parse(self):
        for s in ("scripts/gpu-check.sh", "scripts/gpu-build.sh", "scripts/gpu-bundle.sh",
                  "tests/bundle/bundle_build_check.sh"):
            r = subprocess.run(["bash", "-n", os.path.join(ROOT, s)], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, f"{s}: {r.stderr}")

    def test_device_call_is_documented(self):
        # The header of gpu-check.sh and docs/perf.md give the same one-line device call.
        with open(os.path.join(ROOT, "scripts/gpu-check.sh")) as f:
            head = f.read(3000)
        with open(os.path.join(ROOT, "docs/perf.md")) as f:
            perf = f.read()
        for needle in ("bash scripts/gpu-check.sh", '".gpu-bundle"', "scripts/gpu-bundle.sh"):
            self.assertIn(needle, head)
            self.assertIn(needle, perf)


if __name__ == "__main__":
    unittest.main(verbosity=2)
