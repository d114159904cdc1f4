#!/usr/bin/env python3
"""Writes a Llama-3-70B-shaped GPTQ checkpoint with random codes, for the
cold-start measurement (issue 17; `onecard-bench-cuda load --model DIR`), the
way Hugging Face lays one out: config.json with a `quantization_config`
(quant_method gptq, 4 bits, group 128, symmetric, desc_act false, the v1
checkpoint format), shards model-0000N-of-0000M.safetensors of at most
--shard-gb each (transformers' save_pretrained default is 5 GB) and
model.safetensors.index.json. Per projection: qweight int32 [k / 8, n]
(eight 4-bit codes along k), qzeros int32 [k / 128, n / 8] (v1: the zero
point minus one, 7 for symmetric codes), scales fp16 [k / 128, n], g_idx
int32 [k]; norms, embedding and head fp16. Codes and scales are random
(numpy), the values meaningless; only the sizes and the layout matter.

  python3 scripts/device/make_gptq_checkpoint.py --out /tmp/llama3-70b-gptq

Needs numpy and safetensors (the GPU machine has both with transformers).
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file

SHAPES = {
    # hidden, intermediate, layers, heads, kv heads, vocab
    "llama3-70b": (8192, 28672, 80, 64, 8, 128256),
    "llama3-8b": (4096, 14336, 32, 32, 8, 128256),
    "tiny": (256, 512, 2, 4, 2, 512),  # for trying the script and the loader here
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", default="llama3-70b", choices=sorted(SHAPES))
    parser.add_argument("--shard-gb", type=float, default=5.0)
    parser.add_argument("--layers", type=int, default=0, help="fewer layers (0: the shape's)")
    args = parser.parse_args()
    hidden, inter, layers, heads, kv_heads, vocab = SHAPES[args.shape]
    layers = args.layers or layers
    head_dim = hidden // heads
    group = 128
    rng = np.random.default_rng(70)
    # One pool of random words, sliced: generating 35 GB afresh would take minutes.
    pool = rng.integers(0, 2**32, size=64 << 20, dtype=np.uint32).view(np.int32)
    offset = [0]

    def codes(rows, cols):
        n = rows * cols
        start = offset[0] % (pool.size - n) if n < pool.size else 0
        offset[0] += 7919
        if n <= pool.size:
            return pool[start:start + n].reshape(rows, cols).copy()
        return np.resize(pool, n).reshape(rows, cols)

    def fp16(shape, scale):
        if np.prod(shape) > pool.size * 2:  # the tables: fp16 bits from the pool, |x| < 0.5
            return (np.resize(pool.view(np.uint16), shape) & np.uint16(0xB7FF)).view(np.float16)
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float16)

    def projection(prefix, n, k):
        return {
            f"{prefix}.qweight": codes(k // 8, n),
            f"{prefix}.qzeros": np.full((k // group, n // 8), 0x77777777, dtype=np.int32),
            f"{prefix}.scales": (np.abs(fp16((k // group, n), 0.01)) + np.float16(1e-3)),
            f"{prefix}.g_idx": (np.arange(k, dtype=np.int32) // group),
        }

    os.makedirs(args.out, exist_ok=True)
    limit = int(args.shard_gb * 1e9)
    shards = []  # per written shard: its tensors' names
    current, size, total = {}, 0, 0

    def flush():
        # Written as it fills, renamed once the count is known.
        nonlocal current, size, total
        save_file(current, os.path.join(args.out, f"part-{len(shards)}.tmp"),
                  metadata={"format": "pt"})
        shards.append(list(current))
        total += size
        print(f"shard {len(shards)}: {size / 1e9:.2f} GB", flush=True)
        current, size = {}, 0

    def add(tensors):
        nonlocal size
        for name, t in tensors.items():
            if size + t.nbytes > limit and current:
                flush()
            current[name] = t
            size += t.nbytes

    add({"model.embed_tokens.weight": fp16((vocab, hidden), 0.02)})
    for i in range(layers):
        p = f"model.layers.{i}"
        add({f"{p}.input_layernorm.weight": np.ones(hidden, dtype=np.float16),
             f"{p}.post_attention_layernorm.weight": np.ones(hidden, dtype=np.float16)})
        add(projection(f"{p}.self_attn.q_proj", heads * head_dim, hidden))
        add(projection(f"{p}.self_attn.k_proj", kv_heads * head_dim, hidden))
        add(projection(f"{p}.self_attn.v_proj", kv_heads * head_dim, hidden))
        add(projection(f"{p}.self_attn.o_proj", hidden, heads * head_dim))
        add(projection(f"{p}.mlp.gate_proj", inter, hidden))
        add(projection(f"{p}.mlp.up_proj", inter, hidden))
        add(projection(f"{p}.mlp.down_proj", hidden, inter))
    add({"model.norm.weight": np.ones(hidden, dtype=np.float16),
         "lm_head.weight": fp16((vocab, hidden), 0.02)})
    flush()

    weight_map = {}
    for s, names in enumerate(shards):
        name = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors"
        os.replace(os.path.join(args.out, f"part-{s}.tmp"), os.path.join(args.out, name))
        for t in names:
            weight_map[t] = name
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "vocab_size": vocab, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": "float16", "bos_token_id": min(128000, vocab - 2),
        "eos_token_id": min(128001, vocab - 1),
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": group,
                                "desc_act": False, "sym": True, "checkpoint_format": "gptq"},
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    print(f"{args.shape}: {len(shards)} shards, {total / 1e9:.1f} GB", flush=True)


if __name__ == "__main__":
    main()
