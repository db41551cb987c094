"""GPU machine only: nanovllm (--device cuda) against transformers on the same safetensors.
Logits at every position of a fixed prompt (relative error = max|a-b| / max|b| <= 2e-2) and the
first 32 greedy tokens. Usage: python3 tests/gpu/hf_compare.py NANOVLLM_BIN MODEL_DIR"""
import json
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import AutoModelForCausalLM

nv, model_dir = sys.argv[1], sys.argv[2]
prompt = [int(x) for x in np.random.default_rng(0).integers(3, 5000, size=48)]
ids = ",".join(map(str, prompt))

with tempfile.TemporaryDirectory() as d:
    subprocess.run([nv, "logits", "--device", "cuda", "--model", model_dir, "--prompt-ids", ids,
                    "--out", f"{d}/nv.npy"], check=True)
    nv_logits = np.load(f"{d}/nv.npy").astype(np.float64)

model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16).cuda().eval()
with torch.no_grad():
    hf_logits = model(torch.tensor([prompt], device="cuda")).logits[0].float().cpu().numpy()
err = np.abs(nv_logits - hf_logits).max() / np.abs(hf_logits).max()
print(f"logits: max rel err {err:.3e} over {nv_logits.shape} (tol 2e-2)")

out = subprocess.run([nv, "generate", "--device", "cuda", "--model", model_dir, "--prompt-ids", ids,
                      "--max-tokens", "32", "--temperature", "0", "--ignore-eos", "--json"],
                     check=True, capture_output=True, text=True)
nv_tokens = json.loads(out.stdout)["outputs"][0]["token_ids"]
with torch.no_grad():
    g = model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=32, do_sample=False,
                       min_new_tokens=32)
hf_tokens = g[0, len(prompt):].tolist()
same = 0
for a, b in zip(nv_tokens, hf_tokens):
    if a != b:
        break
    same += 1
print(f"greedy: first {same} of 32 tokens equal")
sys.exit(0 if err <= 2e-2 and same == 32 else 1)
