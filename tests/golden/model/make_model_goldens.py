#!/usr/bin/env python3
"""Makes the goldens of engine/model's tests; every expected value comes from a
reference implementation, never from onecard's code:

  (a) dequant_<TYPE>.bin / .json: seeded random raw blocks of Q8_0, Q4_0,
      Q4_1, Q4_K, Q6_K, F16, BF16 and Q5_K (finite fp16 scales) and their
      values as dequantized by the gguf package (gguf.quants.dequantize).
      Q5_K comes last so that adding it left the others' random draws as
      they were.
  (a') dequant_Q4_K_groups.json: for the blocks of dequant_Q4_K.bin, the
      scale d * sc and min dmin * m of each group of 32, as the gguf package
      computes them (gguf.quants.Q4_K.get_scale_min and dequantize_blocks'
      fp32 products): the terms whose fp16 rounding bounds onecard's 4-bit
      form of Q4_K.
  (b) smollm2_weight_slices.json: slices of SmolLM2-135M-Instruct's weights as
      loaded by transformers from the GGUF file (dequantized, with the Q/K
      permutation of llama.cpp's converter undone), plus whole-tensor sums.
  (c) tiny_safetensors/: a single model.safetensors and a two-shard checkpoint
      with model.safetensors.index.json, written by the safetensors package,
      with the values in expected.json.
  (d) tiny_v3.gguf / tiny_v3.json: a GGUF written by gguf.GGUFWriter with
      metadata of every type and tensors of every supported type, and what
      gguf.GGUFReader reads back.

Run from the repository root (needs torch, transformers, accelerate, gguf,
safetensors, numpy):
  /tmp/goldenv/bin/python tests/golden/model/make_model_goldens.py
Only (a) and (a'), with gguf and numpy alone:
  python3 tests/golden/model/make_model_goldens.py --dequant-only
"""
import importlib.metadata
import json
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

OUT = os.path.join("tests", "golden", "model")
MODEL_DIR = "models"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# (type, blocks, offsets of fp16 fields inside a block)
DEQUANT_CASES = [
    (Q.Q8_0, 6, [0]),
    (Q.Q4_0, 6, [0]),
    (Q.Q4_1, 6, [0, 2]),
    (Q.Q4_K, 3, [0, 2]),
    (Q.Q6_K, 3, [208]),
    (Q.F16, 64, None),
    (Q.BF16, 64, None),
    (Q.Q5_K, 3, [0, 2]),
]


def floats(a):
    """float32 values as JSON numbers (repr of the exact double)."""
    return [float(x) for x in np.asarray(a, dtype=np.float32).ravel()]


def random_fp16(rng, n):
    """Finite fp16 values over many binades, some subnormal, some negative."""
    mag = np.exp2(rng.uniform(-16, 6, size=n)).astype(np.float16)
    sign = np.where(rng.random(n) < 0.5, -1, 1).astype(np.float16)
    return mag * sign


SCALE_OFFSETS = {c[0]: c[2] for c in DEQUANT_CASES}


def random_raw(qtype, blocks, rng):
    """`blocks` random blocks of qtype as bytes, with finite fp16 scales."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == Q.F16:
        vals = random_fp16(rng, blocks)
        vals[:4] = np.array([0.0, -0.0, 65504.0, 6e-8], dtype=np.float16)
        raw = vals.view(np.uint8).reshape(-1)
    elif qtype == Q.BF16:
        bits = rng.integers(0, 1 << 16, size=blocks, dtype=np.uint32).astype(np.uint16)
        finite = (bits & 0x7F80) != 0x7F80  # exponent not all ones
        bits = np.where(finite, bits, bits & 0xBFFF).astype(np.uint16)
        raw = bits.view(np.uint8).reshape(-1)
    else:
        raw = rng.integers(0, 256, size=(blocks, type_size), dtype=np.uint8)
        for off in SCALE_OFFSETS[qtype]:
            scale = random_fp16(rng, blocks) / np.float16(64)
            raw[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(blocks, 2)
        raw = raw.reshape(-1)
    return raw


def dequant_case(qtype, blocks, rng):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = random_raw(qtype, blocks, rng)
    values = gguf.quants.dequantize(raw.copy(), qtype)
    assert values.size == blocks * block_size and np.all(np.isfinite(values)), qtype.name
    name = qtype.name
    with open(os.path.join(OUT, f"dequant_{name}.bin"), "wb") as f:
        f.write(raw.tobytes())
    with open(os.path.join(OUT, f"dequant_{name}.json"), "w") as f:
        json.dump({"type": name, "num_elements": int(values.size), "block_size": block_size,
                   "type_size": type_size, "values": floats(values)}, f)
        f.write("\n")


def make_dequant_goldens():
    rng = np.random.default_rng(20241129)
    for qtype, blocks, _ in DEQUANT_CASES:
        dequant_case(qtype, blocks, rng)


def make_q4k_group_goldens():
    """The group scales and mins of dequant_Q4_K.bin's super-blocks (reads the
    committed blocks: no random draws)."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[Q.Q4_K]
    with open(os.path.join(OUT, "dequant_Q4_K.bin"), "rb") as f:
        blocks = np.frombuffer(f.read(), dtype=np.uint8).reshape(-1, type_size)
    # The fields as Q4_K.dequantize_blocks splits them.
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)  # [blocks, 1]
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    sc, m = gguf.quants.Q4_K.get_scale_min(blocks[:, 4:4 + gguf.quants.Q4_K.K_SCALE_SIZE].copy())
    scales = (d * sc.astype(np.float32)).reshape(-1)  # [blocks * 8]
    mins = (dmin * m.astype(np.float32)).reshape(-1)
    # Consistency with the package's dequantization: every value of group g
    # is scales[g] * q - mins[g] for an integer q in 0..15.
    values = gguf.quants.dequantize(blocks.reshape(-1).copy(), Q.Q4_K).reshape(-1, 32)
    for g in range(values.shape[0]):
        if scales[g] != 0:
            q = (values[g] + mins[g]) / scales[g]
            assert np.all(np.abs(q - np.round(q)) < 1e-3) and q.min() > -0.5 and q.max() < 15.5, g
    with open(os.path.join(OUT, "dequant_Q4_K_groups.json"), "w") as f:
        json.dump({"type": "Q4_K", "blocks_file": "dequant_Q4_K.bin", "group_size": 32,
                   "gguf": importlib.metadata.version("gguf"),
                   "group_scales": floats(scales), "group_mins": floats(mins)}, f)
        f.write("\n")


def weight_slices():
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE,
                                                 dtype=torch.float32)
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    n_layers = model.config.num_hidden_layers
    picks = [("model.embed_tokens.weight", [0, 1, 2, 1000, 49151]), ("model.norm.weight", None)]
    for layer in (0, n_layers - 1):
        p = f"model.layers.{layer}."
        picks += [
            (p + "self_attn.q_proj.weight", [0, 1, 2, 31, 32, 33, 63, 64, 127, 128, 575]),
            (p + "self_attn.k_proj.weight", [0, 1, 31, 32, 33, 63, 64, 127, 191]),
            (p + "self_attn.v_proj.weight", [0, 100, 191]),
            (p + "self_attn.o_proj.weight", [0, 300, 575]),
            (p + "mlp.gate_proj.weight", [0, 1000, 1535]),
            (p + "mlp.up_proj.weight", [0, 1000, 1535]),
            (p + "mlp.down_proj.weight", [0, 575]),
            (p + "input_layernorm.weight", None),
            (p + "post_attention_layernorm.weight", None),
        ]
    slices = []
    for name, rows in picks:
        w = sd[name]
        cols = list(range(8)) + list(range(100, 104)) + list(range(w.shape[-1] - 4, w.shape[-1]))
        entry = {"name": name, "shape": list(w.shape), "cols": cols}
        if rows is None:
            entry["values"] = floats(w[cols])
        else:
            entry["rows"] = rows
            entry["values"] = [floats(w[r, cols]) for r in rows]
        w64 = w.astype(np.float64).reshape(w.shape[0], -1)
        row_index = np.arange(1, w.shape[0] + 1, dtype=np.float64)[:, None]
        entry["sum"] = float(w64.sum())
        entry["row_weighted_sum"] = float((w64 * row_index).sum())
        slices.append(entry)
    golden = {"model": f"{MODEL_DIR}/{MODEL_FILE}", "transformers": transformers.__version__,
              "gguf": importlib.metadata.version("gguf"),
              "tie_word_embeddings": bool(model.config.tie_word_embeddings), "slices": slices}
    with open(os.path.join(OUT, "smollm2_weight_slices.json"), "w") as f:
        json.dump(golden, f, indent=0)
        f.write("\n")


def make_tiny_safetensors():
    import torch
    from safetensors.torch import save_file

    rng = np.random.default_rng(7)
    d = os.path.join(OUT, "tiny_safetensors")
    os.makedirs(os.path.join(d, "single"), exist_ok=True)
    os.makedirs(os.path.join(d, "sharded"), exist_ok=True)
    tensors = {
        "a.f32": torch.tensor(rng.standard_normal((3, 5)), dtype=torch.float32),
        "b.f16": torch.tensor(rng.standard_normal((4,)), dtype=torch.float16),
        "c.bf16": torch.tensor(rng.standard_normal((2, 3)), dtype=torch.bfloat16),
        "d.i32": torch.tensor(rng.integers(-1000, 1000, (2, 2)), dtype=torch.int32),
        "e.i64": torch.tensor(rng.integers(-(1 << 40), 1 << 40, (3,)), dtype=torch.int64),
        "f.u8": torch.tensor(rng.integers(0, 256, (5,)), dtype=torch.uint8),
        "g.scalar": torch.tensor(1.5, dtype=torch.float32),
    }
    save_file(tensors, os.path.join(d, "single", "model.safetensors"), metadata={"format": "pt"})
    shard_of = {name: i % 2 for i, name in enumerate(sorted(tensors))}
    weight_map = {}
    for s in range(2):
        fname = f"model-{s + 1:05d}-of-00002.safetensors"
        part = {n: t for n, t in tensors.items() if shard_of[n] == s}
        save_file(part, os.path.join(d, "sharded", fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    with open(os.path.join(d, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")
    expected = {n: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                    "values": [float(x) if t.is_floating_point() else int(x)
                               for x in t.to(torch.float64 if t.is_floating_point()
                                             else torch.int64).reshape(-1).tolist()],
                    "shard": weight_map[n]}
                for n, t in tensors.items()}
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


def make_tiny_gguf():
    rng = np.random.default_rng(11)
    path = os.path.join(OUT, "tiny_v3.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 50))
    w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo 科创板")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -1.25])
    w.add_array("t.arr_str", ["a", "", "ccc"])
    w.add_array("t.arr_bool", [True, False])
    tensors = {}
    for name, qtype, shape in [("f32", Q.F32, (3, 4)), ("f16", Q.F16, (2, 8)),
                               ("bf16", Q.BF16, (5,)), ("q8_0", Q.Q8_0, (2, 32)),
                               ("q4_0", Q.Q4_0, (1, 64)), ("q4_1", Q.Q4_1, (2, 32)),
                               ("q4_k", Q.Q4_K, (2, 256)), ("q6_k", Q.Q6_K, (1, 256))]:
        if qtype == Q.F32:
            raw = rng.standard_normal(shape).astype(np.float32)
        else:
            block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
            n_blocks = int(np.prod(shape)) // block_size
            byte_shape = tuple(shape[:-1]) + (shape[-1] // block_size * type_size,)
            raw = random_raw(qtype, n_blocks, rng).reshape(byte_shape)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        tensors[name] = qtype
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(path)
    meta = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        meta[key] = field.contents()
    out_tensors = []
    for t in r.tensors:
        values = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        out_tensors.append({"name": t.name, "type": t.tensor_type.name,
                            "shape": [int(x) for x in reversed(t.shape)],
                            "offset": int(t.data_offset), "bytes": int(t.n_bytes),
                            "values": floats(values)})
    with open(os.path.join(OUT, "tiny_v3.json"), "w") as f:
        json.dump({"version": 3, "alignment": 32, "metadata": meta, "tensors": out_tensors},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    make_dequant_goldens()
    make_q4k_group_goldens()
    if "--dequant-only" in sys.argv:
        return
    make_tiny_safetensors()
    make_tiny_gguf()
    if "--no-model" not in sys.argv:
        weight_slices()


if __name__ == "__main__":
    main()
