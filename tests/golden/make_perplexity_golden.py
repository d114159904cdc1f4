#!/usr/bin/env python3
"""Hugging Face's perplexity of a GGUF model (default SmolLM2-135M-Instruct,
the Q4_1 GGUF; dequantized to fp32 by transformers' GGUF loader) over
tests/data/text/sqlite-docs.txt, by the sliding-window loop of the
transformers perplexity guide (docs: "Perplexity of fixed-length models"),
summing the NLL of each window's scored tokens (the guide's token-weighted
form). The text is tokenized with add_special_tokens=False.

  python tests/golden/make_perplexity_golden.py [--device cuda]
      [--gguf models/X.gguf | --hf DIR] [--out tests/golden/x/perplexity.json]
      [--runs 512:256:2048,1024:512:0]

--hf DIR reads a Hugging Face folder instead (e.g. one `onecard quantize`
wrote: a GPTQ folder loads through transformers' GPTQ support, which needs
GPTQModel), so that transformers' perplexity of the very file onecard reads
can be compared with onecard's.
Needs torch, transformers (>= 5), gguf, numpy and the GGUF file.
Writes (default) tests/golden/smollm2/perplexity.json:
  {"source", "text", "text_sha256", "num_tokens", "token_ids_sha256" (of the
   ids as little-endian int32), "runs": [{"window", "stride", "text_tokens",
   "windows", "scored_tokens", "nll_sum", "nll_mean", "perplexity"}]}
Nothing here comes from onecard's own code.
"""
import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_goldens import sha256 as sha256_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = "tests/data/text/sqlite-docs.txt"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# (window, stride, text_tokens): the first is what CI checks (a prefix, on
# the cpu backend); the others are the accuracy table's.
RUNS = [(512, 256, 2048), (1024, 512, 0), (2048, 1024, 0)]


@torch.no_grad()
def perplexity(model, ids, window, stride, device):
    seq_len = len(ids)
    nll_sum, scored, windows, prev_end = 0.0, 0, 0, 0
    for begin in range(0, seq_len, stride):
        end = min(begin + window, seq_len)
        trg_len = end - prev_end
        input_ids = torch.tensor([ids[begin:end]], device=device)
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        loss = model(input_ids, labels=target_ids).loss  # mean over the shifted labels
        n = int((target_ids[:, 1:] != -100).sum().item())
        nll_sum += float(loss.item()) * n
        scored += n
        windows += 1
        prev_end = end
        if end == seq_len:
            break
    return windows, scored, nll_sum


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--gguf", default=os.path.join("models", GGUF))
    parser.add_argument("--hf", default="", help="a Hugging Face folder instead of --gguf")
    parser.add_argument("--out", default=os.path.join("tests", "golden", "smollm2",
                                                      "perplexity.json"))
    parser.add_argument("--runs", default=",".join(f"{w}:{s}:{t}" for w, s, t in RUNS),
                        help="window:stride:text_tokens,... (text_tokens 0 = all)")
    args = parser.parse_args()
    run_list = [tuple(int(v) for v in r.split(":")) for r in args.runs.split(",")]
    if args.hf:
        tok = AutoTokenizer.from_pretrained(args.hf)
        model = AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32,
                                                     device_map=args.device)
        model_source = f"the Hugging Face folder {args.hf} as transformers loads it"
    else:
        gguf_path = os.path.join(ROOT, args.gguf)
        model_dir, gguf = os.path.dirname(gguf_path), os.path.basename(gguf_path)
        tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf)
        model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf,
                                                     dtype=torch.float32)
        model_source = (f"model {gguf} sha256 {sha256_file(gguf_path)}, weights dequantized by "
                        "transformers' GGUF loader")
    model.to(args.device).eval()
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    text_path = os.path.join(ROOT, TEXT)
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    ids = tok(text, add_special_tokens=False).input_ids
    runs = []
    for window, stride, text_tokens in run_list:
        used = ids[:text_tokens] if text_tokens else ids
        windows, scored, nll_sum = perplexity(model, used, window, stride, args.device)
        mean = nll_sum / scored
        runs.append({"window": window, "stride": stride, "text_tokens": text_tokens,
                     "windows": windows, "scored_tokens": scored, "nll_sum": nll_sum,
                     "nll_mean": mean, "perplexity": math.exp(mean)})
        print(json.dumps(runs[-1]), flush=True)
    out = {
        "source": (f"transformers {transformers.__version__}, torch {torch.__version__}, "
                   f"{args.device}, fp32 (no TF32); {model_source}"),
        "text": TEXT,
        "text_sha256": sha256_file(text_path),
        "num_tokens": len(ids),
        "token_ids_sha256": hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest(),
        "runs": runs,
    }
    out_path = os.path.join(ROOT, args.out)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
