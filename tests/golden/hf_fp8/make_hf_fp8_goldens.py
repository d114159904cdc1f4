#!/usr/bin/env python3
"""Tiny FP8 E4M3 Hugging Face checkpoints and the dequantization of every FP8
projection, for the tests of engine/model/hf_fp8.h, and the codes and scales
`onecard quantize --format fp8` must write for tests/golden/tiny_llama.
Nothing here comes from onecard's code.

The files follow the formats' published layouts: tensor names, dtypes and
shapes, and config.json's quantization_config as each project writes them:

  compressed-tensors float-quantized (vllm-project/compressed-tensors, as
        llm-compressor saves it): m.weight F8_E4M3 [n, k] and m.weight_scale,
        [n, 1] for strategy "channel" (the FP8_DYNAMIC preset: dynamic
        per-token input activations), [1] for strategy "tensor" (the FP8
        preset: static per-tensor input activations, m.input_scale [1]);
        scale = amax / 448 (calculate_qparams for float8_e4m3fn, whose range
        is [-448, 448]), the codes float8_e4m3fn(clamp(w / scale)), the scale
        stored in the model's dtype (bf16 for channel here, f32 for tensor);
        "ignore" lists modules left unquantized.
  fp8   (transformers FineGrainedFP8Config, DeepSeek-V3's layout):
        m.weight F8_E4M3 and m.weight_scale_inv F32 [ceil(n / 128),
        ceil(k / 128)], one scale a 128 x 128 block = amax(block) / 448
        (DeepSeek-V3 inference/kernel.py weight_quant); the dequantized value
        is code * weight_scale_inv (weight_dequant: y = x * s), despite the
        name.
  fbgemm_fp8 (transformers FbgemmFp8Config): m.weight F8_E4M3 and
        m.weight_scale F32 [n, 1] = amax(row) / 448 (quantize_fp8_per_row).

The expected dequantized values come from ml_dtypes' float8_e4m3fn decode
of the stored codes times the stored scale (as fp32), in
dequantized.safetensors under the HF names ("...q_proj.weight", [out, in]).
Models: LlamaForCausalLM, 1 layer, tied fp16 embeddings, projections
N(0, 1/k): a small one (hidden 64, intermediate 64, 2 heads of 32, 1 KV
head) for the channel, tensor and fbgemm folders, and one with hidden 136
and intermediate 24 (2 heads of 68, 1 KV head) for the block folder, so its
blocks include partial ones (136 = 128 + 8 columns or rows, 24 < 128).
Folders:
  ct_channel/  compressed-tensors FP8_DYNAMIC, bf16 scales; ignore lm_head
               and "re:.*mlp\\.down_proj$" (down_proj stays F16)
  ct_tensor/   compressed-tensors FP8 (static), f32 scales [1], input_scale
  fp8_block/   fp8, weight_block_size [128, 128]; modules_to_not_convert
               names model.layers.0.mlp.gate_proj (it stays F16)
  fbgemm/      fbgemm_fp8, f32 scales [n, 1]
and quantize_tiny_llama.safetensors: for every projection of tiny_llama
(BF16), the E4M3 codes ("<name>.weight", F8_E4M3) and F32 scales
("<name>.weight_scale", [n, 1]) of per-row quantization with scale =
amax(row) / 448 in fp32 and codes float8_e4m3fn(clip(w / scale, -448, 448)).

  pip install numpy ml_dtypes safetensors
Run from the repository root:  python3 tests/golden/hf_fp8/make_hf_fp8_goldens.py
"""
import json
import os
import struct

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join("tests", "golden", "hf_fp8")
E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
PREFIX = "model.layers.0."
SMALL = dict(vocab=32, hidden=64, inter=64, heads=2, kv_heads=1, head_dim=32)
BLOCKY = dict(vocab=32, hidden=136, inter=24, heads=2, kv_heads=1, head_dim=68)


def projections(m):
    h, i = m["hidden"], m["inter"]
    q, kv = m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    return [("self_attn.q_proj", q, h), ("self_attn.k_proj", kv, h),
            ("self_attn.v_proj", kv, h), ("self_attn.o_proj", h, q),
            ("mlp.gate_proj", i, h), ("mlp.up_proj", i, h), ("mlp.down_proj", h, i)]


def base_model(m, rng):
    """The unquantized model: fp16 embeddings and norms, fp32 projections."""
    h = m["hidden"]
    w = {"model.embed_tokens.weight": rng.standard_normal((m["vocab"], h)).astype(np.float16),
         "model.norm.weight": (1 + 0.1 * rng.standard_normal(h)).astype(np.float16),
         PREFIX + "input_layernorm.weight": (1 + 0.1 * rng.standard_normal(h)).astype(np.float16),
         PREFIX + "post_attention_layernorm.weight":
             (1 + 0.1 * rng.standard_normal(h)).astype(np.float16)}
    proj = {name: (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
            for name, n, k in projections(m)}
    return w, proj


def hf_config(m, quantization_config):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": m["vocab"], "hidden_size": m["hidden"],
            "intermediate_size": m["inter"], "num_hidden_layers": 1,
            "num_attention_heads": m["heads"], "num_key_value_heads": m["kv_heads"],
            "head_dim": m["head_dim"], "hidden_act": "silu", "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
            "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
            "quantization_config": quantization_config}


def to_e4m3(x):
    """float8_e4m3fn(clamp(x, -448, 448)): nearest even, no NaN from overflow."""
    return np.clip(x, -448.0, 448.0).astype(np.float32).astype(E4M3)


def decode(codes):
    return codes.astype(np.float32)


def quantize_rows(w, scale_dtype=np.float32):
    """One scale a row (channel): amax / 448, stored in scale_dtype, and the
    codes of w divided by the stored scale."""
    scale = (np.abs(w).max(1, keepdims=True) / np.float32(448.0)).astype(np.float32)
    stored = scale.astype(scale_dtype)
    codes = to_e4m3(w / stored.astype(np.float32))
    return codes, stored, decode(codes) * stored.astype(np.float32)


def quantize_tensor(w):
    scale = np.array([np.abs(w).max() / np.float32(448.0)], dtype=np.float32)
    codes = to_e4m3(w / scale[0])
    return codes, scale, decode(codes) * scale[0]


def quantize_blocks(w, b=128):
    """DeepSeek-V3 weight_quant: one scale a b x b block (partial at the edges)."""
    n, k = w.shape
    rows, cols = -(-n // b), -(-k // b)
    scale = np.zeros((rows, cols), dtype=np.float32)
    codes = np.zeros((n, k), dtype=E4M3)
    deq = np.zeros((n, k), dtype=np.float32)
    for i in range(rows):
        for j in range(cols):
            blk = w[i * b:(i + 1) * b, j * b:(j + 1) * b]
            s = np.float32(np.abs(blk).max() / np.float32(448.0))
            scale[i, j] = s
            c = to_e4m3(blk / s)
            codes[i * b:(i + 1) * b, j * b:(j + 1) * b] = c
            deq[i * b:(i + 1) * b, j * b:(j + 1) * b] = decode(c) * s
    return codes, scale, deq


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_folder(name, m, tensors, golden, qc):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    save_file(golden, os.path.join(d, "dequantized.safetensors"))
    write_json(os.path.join(d, "config.json"), hf_config(m, qc))


def ct_args(strategy):
    return {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None,
            "strategy": strategy, "block_structure": None, "dynamic": False,
            "actorder": None, "observer": "minmax", "observer_kwargs": {}}


def make_ct_channel(m, base, proj):
    tensors, golden = dict(base), {}
    for pname, n, k in projections(m):
        key = PREFIX + pname
        if pname == "mlp.down_proj":  # ignored: left in the model's dtype
            tensors[key + ".weight"] = proj[pname].astype(np.float16)
            continue
        codes, scale, deq = quantize_rows(proj[pname], BF16)
        tensors[key + ".weight"] = codes
        tensors[key + ".weight_scale"] = scale
        golden[key + ".weight"] = deq
    acts = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None,
            "strategy": "token", "block_structure": None, "dynamic": True, "actorder": None,
            "observer": None, "observer_kwargs": {}}
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "quantization_status": "compressed", "global_compression_ratio": None,
          "ignore": ["lm_head", "re:.*mlp\\.down_proj$"], "kv_cache_scheme": None,
          "sparsity_config": {},
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": ct_args("channel"),
                                        "input_activations": acts, "output_activations": None,
                                        "format": "float-quantized"}}}
    write_folder("ct_channel", m, tensors, golden, qc)


def make_ct_tensor(m, base, proj, rng):
    tensors, golden = dict(base), {}
    for pname, n, k in projections(m):
        key = PREFIX + pname
        codes, scale, deq = quantize_tensor(proj[pname])
        tensors[key + ".weight"] = codes
        tensors[key + ".weight_scale"] = scale
        tensors[key + ".input_scale"] = np.array([0.01 + 0.01 * rng.random()], dtype=np.float32)
        golden[key + ".weight"] = deq
    acts = dict(ct_args("tensor"), observer="static_minmax")
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": None,
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": ct_args("tensor"),
                                        "input_activations": acts, "output_activations": None,
                                        "format": "float-quantized"}}}
    write_folder("ct_tensor", m, tensors, golden, qc)


def make_fp8_block(m, base, proj):
    tensors, golden = dict(base), {}
    for pname, n, k in projections(m):
        key = PREFIX + pname
        if pname == "mlp.gate_proj":  # modules_to_not_convert
            tensors[key + ".weight"] = proj[pname].astype(np.float16)
            continue
        codes, scale, deq = quantize_blocks(proj[pname])
        tensors[key + ".weight"] = codes
        tensors[key + ".weight_scale_inv"] = scale
        golden[key + ".weight"] = deq
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
          "weight_block_size": [128, 128],
          "modules_to_not_convert": ["lm_head", PREFIX + "mlp.gate_proj"]}
    write_folder("fp8_block", m, tensors, golden, qc)


def make_fbgemm(m, base, proj):
    tensors, golden = dict(base), {}
    for pname, n, k in projections(m):
        key = PREFIX + pname
        codes, scale, deq = quantize_rows(proj[pname])
        tensors[key + ".weight"] = codes
        tensors[key + ".weight_scale"] = scale
        golden[key + ".weight"] = deq
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
          "modules_to_not_convert": ["lm_head"]}
    write_folder("fbgemm", m, tensors, golden, qc)


def read_safetensors(path):
    """A safetensors file's tensors (BF16 through ml_dtypes), read directly."""
    dtypes = {"BF16": BF16, "F16": np.float16, "F32": np.float32}
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] not in dtypes:
            continue
        begin, end = t["data_offsets"]
        raw = data[8 + n + begin:8 + n + end]
        out[name] = np.frombuffer(raw, dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


def make_quantize_golden():
    src = read_safetensors(os.path.join("tests", "golden", "tiny_llama", "model.safetensors"))
    out = {}
    for name, w in sorted(src.items()):
        if ".layers." not in name or not name.endswith("_proj.weight"):
            continue
        codes, scale, _ = quantize_rows(w.astype(np.float32))
        out[name] = codes
        out[name[:-len("weight")] + "weight_scale"] = scale
    save_file(out, os.path.join(OUT, "quantize_tiny_llama.safetensors"))


def main():
    base, proj = base_model(SMALL, np.random.default_rng(20261218))
    make_ct_channel(SMALL, base, proj)
    make_ct_tensor(SMALL, base, proj, np.random.default_rng(3))
    make_fbgemm(SMALL, base, proj)
    base, proj = base_model(BLOCKY, np.random.default_rng(20261219))
    make_fp8_block(BLOCKY, base, proj)
    make_quantize_golden()


if __name__ == "__main__":
    main()
