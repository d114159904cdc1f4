#!/usr/bin/env python3
"""Writes a Hugging Face checkpoint (safetensors, config.json, tokenizer
files) of a GGUF model as Hugging Face transformers loads it: every weight
dequantized to fp32 by transformers' GGUF loader, saved by save_pretrained.
It is the input of `onecard quantize` for the accuracy table's re-quantized
rows (bench/results/accuracy.md): the file's own weights, quantized again
to 4 bits by onecard, so that only the second rounding is measured.

  python tests/golden/export_hf_checkpoint.py models/X.gguf OUT_DIR [--dtype float32]

Needs torch, transformers (>= 5), gguf and numpy (the GPU machine has all but
gguf; scripts/device/run.sh carries its wheel). Nothing here comes from
onecard's own code.
"""
import argparse
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("gguf")
    parser.add_argument("out")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    model_dir, gguf = os.path.dirname(os.path.abspath(args.gguf)), os.path.basename(args.gguf)
    dtype = getattr(torch, args.dtype)
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf)
    loaded = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf, dtype=dtype)
    # transformers will not save a model loaded from GGUF (it counts as
    # quantized): the same weights go into a plain model of the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(loaded).__name__]
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(loaded.state_dict())
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    with open(os.path.join(args.out, "export.json"), "w") as f:
        json.dump({"gguf": gguf, "dtype": args.dtype,
                   "transformers": transformers.__version__, "torch": torch.__version__}, f)
        f.write("\n")
    print(f"export_hf_checkpoint: {args.gguf} -> {args.out} ({args.dtype})", flush=True)


if __name__ == "__main__":
    main()
