#!/usr/bin/env python3
"""GPTQ round-to-nearest of a few projections of tests/golden/tiny_qwen2
(F32), quantized and packed as GPTQModel publishes it, for
tests/tools/onecard/quantize_command_test.cc (`onecard quantize --method rtn`
must write these bytes). Nothing here comes from onecard's code: the
quantizer, the packer and the v2 -> v1 zero-point conversion are those of
tests/golden/hf_int4/make_hf_int4_goldens.py (GPTQModel's quantizer.py
find_params/quantize, PackableQuantLinear.pack, convert_gptq_v2_to_v1_format,
ported line by line to numpy; GPTQ with an identity Hessian is
round-to-nearest). Groups of 32; sym true and false; no act order.

Output: tiny_qwen2_g32.safetensors with, for S in sym, asym and each module M,
"S/M.qweight", "S/M.qzeros" (v1: minus 0x11111111), "S/M.scales" (fp16),
"S/M.g_idx".

Run from the repository root:  python3 tests/golden/quantize/make_quantize_goldens.py
"""
import importlib.util
import json
import os

import numpy as np
from safetensors.numpy import load_file, save_file

SRC = os.path.join("tests", "golden", "tiny_qwen2")
OUT = os.path.join("tests", "golden", "quantize", "tiny_qwen2_g32.safetensors")
GROUP = 32
MODULES = ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
           "model.layers.2.mlp.down_proj"]


def upstream():
    path = os.path.join("tests", "golden", "hf_int4", "make_hf_int4_goldens.py")
    spec = importlib.util.spec_from_file_location("hf_int4_goldens", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    g = upstream()
    index = json.load(open(os.path.join(SRC, "model.safetensors.index.json")))["weight_map"]
    out = {}
    for sym, tag in [(True, "sym"), (False, "asym")]:
        for m in MODULES:
            w = load_file(os.path.join(SRC, index[m + ".weight"]))[m + ".weight"]
            w = w.astype(np.float32)
            w_q, scales, zeros, g_idx = g.gptq_quantize(w, GROUP, sym, np.arange(w.shape[1]))
            qweight, qzeros_v2, scales16 = g.gptq_pack(w_q, scales, zeros, g_idx)
            out.update({f"{tag}/{m}.qweight": qweight,
                        f"{tag}/{m}.qzeros": g.gptq_v2_to_v1(qzeros_v2),
                        f"{tag}/{m}.scales": scales16,
                        f"{tag}/{m}.g_idx": g_idx})
    save_file(out, OUT)


if __name__ == "__main__":
    main()
