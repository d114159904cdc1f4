#!/usr/bin/env python3
"""Tiny 4-bit Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors) and the
upstream dequantization of every quantized projection, for the tests of
engine/model/hf_int4.h. Nothing here comes from onecard's code: each format is
quantized, packed and dequantized as its own project publishes it, ported line
by line from torch to numpy (no torch needed; numpy, safetensors):

  GPTQ  GPTQModel (ModelCloud/GPTQModel): quantization/quantizer.py
        Quantizer.find_params + quantize (GPTQ with an identity Hessian is
        round-to-nearest: nothing propagates between columns), gptq.py's
        desc_act order and g_idx (g_idx = [i // group for i][invperm]),
        nn_modules/qlinear/__init__.py PackableQuantLinear.pack (4-bit,
        int32) and dequantize_weight, utils/model.py
        convert_gptq_v2_to_v1_format_module (v1: qzeros -= 0x11111111, one
        int32 subtraction). desc_act's order comes from argsort(diag(H)) of
        calibration data upstream; here it is a seeded random permutation.
  AWQ   AutoAWQ (casper-hansen/AutoAWQ): quantize/quantizer.py
        pseudo_quantize_tensor with zero_point (no activation-aware scale
        search: plain round-to-nearest), the transposes of _apply_quant,
        modules/linear/gemm.py WQLinear_GEMM.from_linear (order map
        [0, 2, 4, 6, 1, 3, 5, 7]) and utils/packing_utils.py dequantize_gemm.
  compressed-tensors (vllm-project/compressed-tensors):
        quantization/utils/helpers.py calculate_qparams (min-max),
        quantization/lifecycle/forward.py _quantize / _dequantize,
        compressors/pack_quantized pack_to_int32 / unpack_from_int32
        (zero points packed along dim 0), format "pack-quantized".

Every upstream dequantization computes s * (q - z) in fp16 (the scales'
dtype): the goldens are those fp16 values, in dequantized.safetensors under
the HF names ("model.layers.0.self_attn.q_proj.weight", [out, in]).

The model: LlamaForCausalLM, vocab 32, hidden 64, intermediate 64, 1 layer,
2 heads of 32, 1 KV head, tied fp16 embeddings; projections N(0, 1/k).
Folders:
  gptq_v1_act/  GPTQ v1 ("checkpoint_format": "gptq"), sym false, desc_act
                true (shuffled g_idx), group 32; the config only in
                quantize_config.json (AutoGPTQ's layout)
  gptq_v2_sym/  GPTQ v2, sym true, group 64, desc_act false; config.json's
                quantization_config (GPTQModel's layout)
  awq/          AutoAWQ GEMM, zero_point, group 64
  compressed/   compressed-tensors pack-quantized W4A16: attention projections
                group 32 asymmetric, MLP projections channel-wise symmetric

Run from the repository root:  python3 tests/golden/hf_int4/make_hf_int4_goldens.py
"""
import json
import os

import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join("tests", "golden", "hf_int4")
VOCAB, HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM = 32, 64, 64, 2, 1, 32
PROJ = [("self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
        ("self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
        ("self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
        ("self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
        ("mlp.gate_proj", INTER, HIDDEN),
        ("mlp.up_proj", INTER, HIDDEN),
        ("mlp.down_proj", HIDDEN, INTER)]
PREFIX = "model.layers.0."


def base_model(rng):
    """Unquantized fp32 weights of the tiny model, HF names and layout."""
    w = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, HIDDEN)).astype(np.float16),
         "model.norm.weight": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float16),
         PREFIX + "input_layernorm.weight": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float16),
         PREFIX + "post_attention_layernorm.weight":
             (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float16)}
    proj = {name: (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
            for name, n, k in PROJ}
    return w, proj


def hf_config(quantization_config=None):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
         "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": 1,
         "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
         "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
         "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "float16",
         "bos_token_id": 1, "eos_token_id": 2}
    if quantization_config is not None:
        c["quantization_config"] = quantization_config
    return c


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


# ---- GPTQ (GPTQModel) -------------------------------------------------------

def gptq_find_params(x, sym, maxq=15):
    """Quantizer.find_params(x, weight=True), per channel: x [n, cols]."""
    xmin = np.minimum(x.min(1), 0)
    xmax = np.maximum(x.max(1), 0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both = (xmin == 0) & (xmax == 0)
    xmin = np.where(both, -1, xmin)
    xmax = np.where(both, 1, xmax)
    scale = ((xmax - xmin) / maxq).astype(np.float32)
    zero = np.full_like(scale, (maxq + 1) / 2) if sym else np.round(-xmin / scale)
    return scale, zero.astype(np.float32)


def gptq_quantize(w, group, sym, perm):
    """GPTQ over columns in `perm` order with an identity Hessian: returns the
    fake-quantized weight Q (original order), scales and zeros [n, G], g_idx."""
    n, k = w.shape
    wp = w[:, perm]
    q = np.zeros_like(wp)
    scales, zeros = [], []
    for i in range(k):
        if i % group == 0:
            scale, zero = gptq_find_params(wp[:, i:i + group], sym)
            scales.append(scale)
            zeros.append(zero)
        codes = np.clip(np.round(wp[:, i] / scale) + zero, 0, 15)
        q[:, i] = scale * (codes - zero)
    invperm = np.argsort(perm)
    g_idx = np.array([i // group for i in range(k)], dtype=np.int32)[invperm]
    return q[:, invperm], np.stack(scales, 1), np.stack(zeros, 1), g_idx


def gptq_pack(w_q, scales, zeros, g_idx):
    """PackableQuantLinear.pack (4-bit, int32): qweight [k/8, n], qzeros [G, n/8]
    holding z itself (GPTQModel's internal v2), fp16 scales [G, n]."""
    scales = scales.T.copy()  # [G, n]
    zeros = zeros.T.copy()
    scale_zeros = zeros * scales
    int_weight = np.round((w_q + scale_zeros[g_idx].T) / scales[g_idx].T).astype(np.int32)
    int_weight = int_weight.T.copy().astype(np.uint32)  # [k, n]
    qweight = np.zeros((int_weight.shape[0] // 8, int_weight.shape[1]), dtype=np.uint32)
    for row in range(qweight.shape[0]):
        for j in range(8):
            qweight[row] |= int_weight[row * 8 + j] << (4 * j)
    zeros = zeros.astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 8), dtype=np.uint32)
    for col in range(qzeros.shape[1]):
        for j in range(8):
            qzeros[:, col] |= zeros[:, col * 8 + j] << (4 * j)
    return qweight.view(np.int32), qzeros.view(np.int32), scales.astype(np.float16)


def gptq_v2_to_v1(qzeros):
    """convert_gptq_v2_to_v1_format_module: qzeros -= 0b0001...0001 (int32)."""
    return (qzeros.view(np.uint32) - np.uint32(0x11111111)).view(np.int32)


def gptq_v1_to_v2(qzeros):
    """convert_gptq_v1_to_v2_format_module: qzeros += 0b0001...0001 (int32)."""
    return (qzeros.view(np.uint32) + np.uint32(0x11111111)).view(np.int32)


def gptq_dequantize(qweight, qzeros_v2, scales, g_idx):
    """PackableQuantLinear.dequantize_weight (4-bit; v2 zeros): fp16 [k, n]."""
    wf = np.arange(0, 32, 4, dtype=np.int32)
    zeros = (qzeros_v2[:, :, None] >> wf[None, None, :]).astype(np.int8)
    zeros = np.bitwise_and(zeros, 15).reshape(scales.shape)
    weight = np.bitwise_and((qweight[:, None, :] >> wf[None, :, None]).astype(np.int8), 15)
    weight = weight.reshape(weight.shape[0] * weight.shape[1], weight.shape[2])
    diff = (weight - zeros[g_idx]).astype(np.float16)
    return scales[g_idx] * diff


def make_gptq(name, base, proj, rng, group, sym, desc_act, v2):
    tensors, golden = dict(base), {}
    for pname, n, k in PROJ:
        perm = rng.permutation(k) if desc_act else np.arange(k)
        w_q, scales, zeros, g_idx = gptq_quantize(proj[pname], group, sym, perm)
        qweight, qzeros_v2, scales16 = gptq_pack(w_q, scales, zeros, g_idx)
        qzeros = qzeros_v2 if v2 else gptq_v2_to_v1(qzeros_v2)
        key = PREFIX + pname
        tensors.update({key + ".qweight": qweight, key + ".qzeros": qzeros,
                        key + ".scales": scales16, key + ".g_idx": g_idx})
        loaded = qzeros if v2 else gptq_v1_to_v2(qzeros)  # what GPTQModel loads
        golden[key + ".weight"] = gptq_dequantize(qweight, loaded, scales16, g_idx).T.copy()
    qc = {"bits": 4, "group_size": group, "desc_act": desc_act, "sym": sym,
          "lm_head": False, "quant_method": "gptq",
          "checkpoint_format": "gptq_v2" if v2 else "gptq", "pack_dtype": "int32"}
    write_folder(name, tensors, golden, qc, in_config=v2)


# ---- AWQ (AutoAWQ GEMM) -----------------------------------------------------

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def awq_pseudo_quantize(w, group):
    """pseudo_quantize_tensor, zero_point: returns fake-quantized w, scales and
    zeros [n, G]."""
    n, k = w.shape
    g = w.reshape(-1, group)
    max_val = g.max(1, keepdims=True)
    min_val = g.min(1, keepdims=True)
    scales = np.maximum(max_val - min_val, 1e-5) / 15
    zeros = np.clip(-np.round(min_val / scales), 0, 15)
    g = (np.clip(np.round(g / scales) + zeros, 0, 15) - zeros) * scales
    return g.reshape(n, k), scales.reshape(n, -1), zeros.reshape(n, -1)


def awq_from_linear(w, scales, zeros, group):
    """WQLinear_GEMM.from_linear with _apply_quant's scales.t(), zeros.t()."""
    scales, zeros = scales.T.copy(), zeros.T.copy()  # [G, n]
    scale_zeros = zeros * scales
    scales16 = scales.astype(np.float16)
    k = w.shape[1]
    intweight = np.stack([np.round((w[:, idx] + scale_zeros[idx // group]) /
                                   scales16[idx // group].astype(np.float32)).astype(np.int32)
                          for idx in range(k)], 1)
    intweight = intweight.T.copy()  # [k, n]
    assert intweight.min() >= 0 and intweight.max() <= 15
    qweight = np.zeros((intweight.shape[0], intweight.shape[1] // 8), dtype=np.int32)
    for col in range(intweight.shape[1] // 8):
        for i in range(8):
            qweight[:, col] |= intweight[:, col * 8 + AWQ_ORDER[i]] << (i * 4)
    zeros = zeros.astype(np.int32)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 8), dtype=np.int32)
    for col in range(zeros.shape[1] // 8):
        for i in range(8):
            qzeros[:, col] |= zeros[:, col * 8 + AWQ_ORDER[i]] << (i * 4)
    return qweight, qzeros, scales16


def awq_dequantize_gemm(qweight, qzeros, scales, group):
    """unpack_awq + reverse_awq_order + dequantize_gemm: fp16 [k, n]."""
    shifts = np.arange(0, 32, 4, dtype=np.int32)
    iweights = (qweight[:, :, None] >> shifts[None, None, :]).astype(np.int8)
    iweights = iweights.reshape(iweights.shape[0], -1)
    izeros = (qzeros[:, :, None] >> shifts[None, None, :]).astype(np.int8)
    izeros = izeros.reshape(izeros.shape[0], -1)
    order = np.arange(izeros.shape[-1]).reshape(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
    iweights, izeros = iweights[:, order] & 15, izeros[:, order] & 15
    scales = np.repeat(scales, group, axis=0)
    izeros = np.repeat(izeros, group, axis=0)
    return (iweights - izeros).astype(np.float16) * scales


def make_awq(name, base, proj, group):
    tensors, golden = dict(base), {}
    for pname, n, k in PROJ:
        w_q, scales, zeros = awq_pseudo_quantize(proj[pname], group)
        qweight, qzeros, scales16 = awq_from_linear(w_q, scales, zeros, group)
        key = PREFIX + pname
        tensors.update({key + ".qweight": qweight, key + ".qzeros": qzeros,
                        key + ".scales": scales16})
        golden[key + ".weight"] = awq_dequantize_gemm(qweight, qzeros, scales16, group).T.copy()
    qc = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
          "version": "gemm", "modules_to_not_convert": None}
    write_folder(name, tensors, golden, qc, in_config=True)


# ---- compressed-tensors pack-quantized --------------------------------------

def ct_qparams(w, group, symmetric):
    """calculate_qparams over groups of `group` columns (None: one a row):
    scales [n, G] and int8 zero points [n, G]."""
    n, k = w.shape
    g = w.reshape(n, -1, group if group else k)
    min_vals = np.minimum(g.min(-1), 0)
    max_vals = np.maximum(g.max(-1), 0)
    if symmetric:
        scales = np.maximum(np.abs(min_vals), np.abs(max_vals)) / (15 / 2)
        zero_points = np.zeros_like(scales)
    else:
        scales = (max_vals - min_vals) / 15
        zero_points = np.clip(-8 - min_vals / scales, -8, 7)
    scales = np.where(scales == 0, np.finfo(np.float16).eps, scales).astype(np.float16)
    return scales, np.round(zero_points).astype(np.int8)


def ct_quantize(w, scales, zero_points):
    """_quantize: round(clamp(x / scale + zp, -8, 7)) as int8."""
    n, k = w.shape
    groups = scales.shape[1]
    x = w.reshape(n, groups, k // groups) / scales.astype(np.float32)[:, :, None]
    x = x + zero_points.astype(np.float32)[:, :, None]
    return np.round(np.clip(x, -8, 7)).astype(np.int8).reshape(n, k)


def ct_pack_to_int32(value, packed_dim=1):
    """pack_to_int32(value, 4, packed_dim): element i of a row at bits 4 i % 32."""
    value = value.astype(np.int32) + 8
    if packed_dim == 0:
        value = value.T
    rows, cols = value.shape
    padded = -(-cols // 8) * 8
    value = np.pad(value, ((0, 0), (0, padded - cols))).reshape(rows, padded // 8, 8)
    packed = np.zeros((rows, padded // 8), dtype=np.uint32)
    for i in range(8):
        packed |= value[:, :, i].astype(np.uint32) << np.uint32(4 * i)
    packed = packed.view(np.int32)
    return packed.T.copy() if packed_dim == 0 else packed


def ct_unpack_from_int32(value, shape, packed_dim=1):
    """unpack_from_int32(value, 4, shape, packed_dim) as int8."""
    if packed_dim == 0:
        value = value.T
    out = np.zeros((value.shape[0], value.shape[1] * 8), dtype=np.int32)
    for i in range(8):
        out[:, i::8] = (value >> (4 * i)) & 15
    out = out[:, :shape[packed_dim]]
    if packed_dim == 0:
        out = out.T
    return (out - 8).astype(np.int8)


def ct_dequantize(x_q, scales, zero_points):
    """_dequantize in the scales' dtype: (x_q - zp) * scale, fp16 [n, k]."""
    n, k = x_q.shape
    groups = scales.shape[1]
    x = x_q.astype(np.float16).reshape(n, groups, k // groups)
    if zero_points is not None:
        x = x - zero_points.astype(np.float16)[:, :, None]
    return (x * scales[:, :, None]).reshape(n, k)


def make_compressed(name, base, proj, schemes):
    tensors, golden = dict(base), {}
    for pname, n, k in PROJ:
        group, symmetric = schemes["attn" if "self_attn" in pname else "mlp"]
        scales, zero_points = ct_qparams(proj[pname], group, symmetric)
        x_q = ct_quantize(proj[pname], scales, zero_points)
        key = PREFIX + pname
        tensors[key + ".weight_packed"] = ct_pack_to_int32(x_q)
        tensors[key + ".weight_scale"] = scales
        tensors[key + ".weight_shape"] = np.array([n, k], dtype=np.int64)
        zp = None
        if not symmetric:
            tensors[key + ".weight_zero_point"] = ct_pack_to_int32(zero_points, packed_dim=0)
            zp = ct_unpack_from_int32(tensors[key + ".weight_zero_point"], (n, scales.shape[1]),
                                      packed_dim=0)
        unpacked = ct_unpack_from_int32(tensors[key + ".weight_packed"], (n, k))
        golden[key + ".weight"] = ct_dequantize(unpacked, scales, zp)

    def weights(group, symmetric):
        return {"num_bits": 4, "type": "int", "symmetric": symmetric,
                "strategy": "group" if group else "channel", "group_size": group,
                "actorder": None, "dynamic": False, "observer": "minmax"}
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": None,
          "config_groups": {
              "group_0": {"targets": ["re:.*self_attn\\.(q|k|v|o)_proj$"],
                          "weights": weights(*schemes["attn"]), "input_activations": None,
                          "output_activations": None, "format": "pack-quantized"},
              "group_1": {"targets": ["Linear"], "weights": weights(*schemes["mlp"]),
                          "input_activations": None, "output_activations": None,
                          "format": "pack-quantized"}}}
    write_folder(name, tensors, golden, qc, in_config=True)


def write_folder(name, tensors, golden, qc, in_config):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    save_file(golden, os.path.join(d, "dequantized.safetensors"))
    write_json(os.path.join(d, "config.json"), hf_config(qc if in_config else None))
    if not in_config:
        write_json(os.path.join(d, "quantize_config.json"), qc)


def main():
    base, proj = base_model(np.random.default_rng(20261203))
    make_gptq("gptq_v1_act", base, proj, np.random.default_rng(1), group=32, sym=False,
              desc_act=True, v2=False)
    make_gptq("gptq_v2_sym", base, proj, np.random.default_rng(2), group=64, sym=True,
              desc_act=False, v2=True)
    make_awq("awq", base, proj, group=64)
    make_compressed("compressed", base, proj, {"attn": (32, False), "mlp": (None, True)})


if __name__ == "__main__":
    main()
