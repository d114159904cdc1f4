"""The qwen2.5-coder mode of make_goldens.py: Hugging Face transformers'
logits and greedy continuations of Qwen2.5-Coder-1.5B-Instruct, from the
Q4_K_M GGUF that `scripts/fetch-model.sh qwen` fetches, loaded by
transformers' GGUF loader (gguf_file=, weights dequantized to fp32 by the gguf
package) and run in fp32 on the CPU or a CUDA device with TF32 off.

Before any logit is taken, every weight transformers loaded is compared with
the gguf package's own dequantization of the file's tensor (bit for bit): the
golden must be the file's model. Should a transformers version undo llama's
Q/K row permutation on this qwen2 file (llama.cpp's converter permutes only
llama-architecture Q/K), the check says so and stops.

Output: tests/golden/qwen2_5_coder/logits.json (+ <prompt>.last.f32), the
format of tests/golden/README.md, plus "greedy_text" (HF's decoding of the
greedy ids) and, for the chat prompt, "messages".
"""
import importlib.metadata
import os

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.path.join(ROOT, "models")
MODEL_FILE = "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
OUT_DIR = os.path.join(ROOT, "tests", "golden", "qwen2_5_coder")

CHAT = [{"role": "user", "content": "Write a Python function that reverses a string."}]
# (name, text or None for the chat prompt)
PROMPTS = [
    ("capital", "The capital of France is"),
    ("code", 'def is_prime(n: int) -> bool:\n    """Return True if n is a prime number."""\n'),
    ("chat", None),
    ("mixed", "科创板 is a stock market in Shanghai. 🚀 Numbers: 12345 + 678 ="),
]

# The file's per-layer tensor names and transformers' names for them.
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def hf_name(gguf_name):
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    _, layer, rest = gguf_name.split(".", 2)
    return f"model.layers.{layer}.{LAYER_NAMES[rest]}"


def llama_unpermute(w, heads):
    """transformers' reversal of llama.cpp's Q/K row permutation."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(2, 1).reshape(
        w.shape)


def check_weights(model, path):
    """Every tensor of the file, dequantized by the gguf package, equals the
    weight transformers loaded; raises naming the first that does not."""
    reader = gguf.GGUFReader(path)
    state = model.state_dict()
    config = model.config
    for t in reader.tensors:
        name = hf_name(t.name)
        want = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        got = state[name].detach().float().cpu().numpy()
        if got.shape == want.shape and np.array_equal(got, want):
            continue
        why = f"{t.name} ({t.tensor_type.name}) -> {name}: transformers' values differ"
        heads = (config.num_attention_heads if ".attn_q." in t.name
                 else config.num_key_value_heads)
        if got.shape == want.shape and (".attn_q." in t.name or ".attn_k." in t.name) and \
                np.array_equal(got, llama_unpermute(want, heads)):
            why += (" by llama's Q/K un-permutation, which llama.cpp never applied to a qwen2 "
                    "file: this transformers version mis-loads Qwen2 GGUF files")
        elif name == "lm_head.weight":
            why += f" (tie_word_embeddings = {config.tie_word_embeddings}; the file has output.weight)"
        raise SystemExit(f"qwen2.5-coder golden: {why}; no golden written")
    print(f"qwen2.5-coder: all {len(reader.tensors)} tensors equal the gguf package's "
          "dequantization", flush=True)


def device_name(device):
    if device == "cuda":
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return "cpu"


def make_qwen(device, logits_record, write_logits_json, sha256, num_sample_ids):
    path = os.path.join(MODEL_DIR, MODEL_FILE)
    digest = sha256(path)
    if digest != MODEL_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {MODEL_SHA256} "
                         "(scripts/fetch-model.sh qwen)")
    # fp32 throughout: no TF32 in matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE,
                                                 dtype=torch.float32)
    model.eval()
    check_weights(model, path)
    model.to(device)
    os.makedirs(OUT_DIR, exist_ok=True)
    rng = np.random.default_rng(1234)
    sample_ids = sorted(rng.choice(model.config.vocab_size, num_sample_ids, replace=False).tolist())
    records = []
    for name, text in PROMPTS:
        extra = {"chat": text is None}
        if text is None:
            text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
            extra["messages"] = CHAT
        extra["text"] = text
        ids = tok(text, add_special_tokens=False).input_ids
        print(f"qwen2.5-coder {name}: {len(ids)} tokens", flush=True)
        rec = logits_record(model, name, ids, sample_ids, OUT_DIR, extra, device=device)
        rec["greedy_text"] = tok.decode(rec["greedy_ids"])
        print(f"  greedy: {rec['greedy_text']!r}", flush=True)
        records.append(rec)
    source = (f"transformers {transformers.__version__}, torch {torch.__version__}, "
              f"gguf {importlib.metadata.version('gguf')}, {device_name(device)}, fp32, TF32 off; "
              f"model {MODEL_FILE} sha256 {digest}; weights dequantized by transformers' GGUF "
              "loader and checked equal to the gguf package's dequantization")
    write_logits_json(OUT_DIR, source, sample_ids, records)
    print(f"qwen2.5-coder: wrote {OUT_DIR}", flush=True)
