"""Seeded random tiny checkpoints of the Llama and Qwen2 architectures, with
their Hugging Face logits. Called by make_goldens.py ("tiny").

tiny_llama: LlamaForCausalLM, llama3 rope scaling, GQA 4:2, untied head,
            bf16 safetensors in one file.
tiny_qwen2: Qwen2ForCausalLM, q/k/v bias, GQA 4:1, tied embeddings,
            f32 safetensors sharded with model.safetensors.index.json.
The tokenizers are the tiny byte-level BPEs in tests/golden/tokenizer/.
"""
import os
import shutil

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")

PROMPTS = [
    ("hello", "Hello, world! How are you today?"),
    ("code", "for (int i = 0; i < 10; ++i) { sum += i * 2; }"),
    ("mixed", "Numbers 12345 and 科创板 and émigré 🚀 go here."),
    ("spaces", "  leading spaces\n\n\tand tabs   and trailing   "),
]


def randomize(model, seed):
    """Replaces every parameter with seeded N(0, 0.5/sqrt(fan_in)) values (norms ~1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / p.shape[-1] ** 0.5))


def build(kind, vocab):
    if kind == "tiny_llama":
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=160,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False,
                          rope_theta=500000.0, bos_token_id=None, eos_token_id=None,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 64})
        return LlamaForCausalLM(cfg), torch.bfloat16, None
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=96, intermediate_size=192,
                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
                      max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=True,
                      rope_theta=1000000.0, use_sliding_window=False)
    return Qwen2ForCausalLM(cfg), torch.float32, "400KB"


def make_one(kind, tok_dir, seed, logits_record, write_logits_json, versions, num_sample):
    out_dir = os.path.join(GOLDEN, kind)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    model, dtype, shard = build(kind, len(tok))
    model.config.bos_token_id = tok.bos_token_id
    model.config.eos_token_id = tok.eos_token_id
    randomize(model, seed)
    model = model.to(dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(out_dir, safe_serialization=True, **kwargs)
    tok.save_pretrained(out_dir)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(out_dir, f))
    # The reference runs in fp32 on the stored (possibly bf16) values, reloaded
    # from disk: model.float() would keep the bf16-rounded rotary frequencies.
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
    rng = np.random.default_rng(seed)
    sample_ids = sorted(rng.choice(model.config.vocab_size, num_sample, replace=False).tolist())
    records = []
    for name, text in PROMPTS:
        ids = tok(text, add_special_tokens=False).input_ids
        records.append(logits_record(model, name, ids, sample_ids, out_dir,
                                     {"text": text, "chat": False}))
    write_logits_json(out_dir, f"{versions()}; seeded random weights (seed {seed})",
                      sample_ids, records)
    print(f"{kind}: vocab {len(tok)}, files {sorted(os.listdir(out_dir))}")


def make_tiny(logits_record, write_logits_json, versions, num_sample):
    tok_root = os.path.join(GOLDEN, "tokenizer")
    make_one("tiny_llama", os.path.join(tok_root, "tiny_llama3"), 7, logits_record,
             write_logits_json, versions, num_sample)
    make_one("tiny_qwen2", os.path.join(tok_root, "tiny_qwen2"), 11, logits_record,
             write_logits_json, versions, num_sample)
