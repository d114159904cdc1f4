#!/usr/bin/env python3
"""4-bit Hugging Face checkpoints of SmolLM2-135M-Instruct (GPTQ v1 desc_act,
AutoAWQ GEMM) and Hugging Face transformers' logits of what they hold, for the
CUDA backend's greedy check with 4-bit kernels (issue 17). Nothing here comes
from onecard's code.

The weights are those of models/SmolLM2-135M-Instruct.Q4_1.gguf as
transformers' GGUF loader dequantizes them to fp32. Every projection of every
layer is quantized, packed and dequantized by the formats' own published code,
ported line by line to numpy in hf_int4/make_hf_int4_goldens.py (imported
here, not copied; its header cites each upstream function): GPTQModel's
Quantizer / PackableQuantLinear.pack / v2 -> v1 and dequantize_weight, and
AutoAWQ's pseudo_quantize_tensor / WQLinear_GEMM.from_linear /
dequantize_gemm. GPTQModel and AutoAWQ themselves cannot run on the GPU
machine (GPTQModel needs torch >= 2.14 and ships only an sdist; no registry
there).

GPTQ desc_act order (GPTQModel gptq.py, GPTQ.quantize): perm =
argsort(diag(H), descending), after dead columns (diag(H) == 0) get H = 1 and
W[:, dead] = 0; H = (2 / N) sum x x^T over the N calibration tokens
(process_batch). diag(H) here is accumulated by forward hooks on each
projection's input over the first CALIBRATION_TOKENS tokens of
tests/data/text/sqlite-calibration.txt, in windows of CALIBRATION_WINDOW, in
one pass of the unquantized model (GPTQModel feeds each layer the output of
the already quantized layers before it: the order here is what the fp32
model's activations give). q/k/v read one input and so do gate/up: their
diag(H) are equal bit for bit (checked), so they share one order. The
quantization itself is GPTQ with an identity Hessian, i.e. round-to-nearest
in act order (no error propagation), asymmetric, v1 zero points.

Group size: GROUP_SIZE = 64, not 128: SmolLM2's hidden size 576 is not a
multiple of 128; AutoAWQ asserts in_features % group_size == 0
(pseudo_quantize_tensor), and so does onecard's loader (engine/model/hf_int4.cc);
--group-size 128 stops at that check.

Folders under --out-models (not committed, ~110 MB each):
  smollm2-gptq-act/  model.safetensors (qweight, qzeros, scales, g_idx), AutoGPTQ
                     0.7's layout: quantize_config.json and config.json's
                     quantization_config (BaseQuantizeConfig.to_dict:
                     checkpoint_format "gptq", desc_act true, sym false)
  smollm2-awq/       model.safetensors (qweight, qzeros, scales), AutoAWQ's
                     layout: config.json's quantization_config
                     (AwqConfig.to_transformers_dict, version "gemm")
Both: config.json (the HF model's LlamaConfig, dtype float16), tokenizer files
(tokenizer.save_pretrained), embeddings and norms in fp16 as AutoGPTQ and
AutoAWQ write them (both quantize an fp16 model), tied embeddings (no
lm_head.weight) like the GGUF.

Goldens (logits.json format: tests/golden/README.md), committed:
  tests/golden/smollm2_gptq_act/, tests/golden/smollm2_awq/: make_goldens.py's
  logits_record on the prompts and sample ids of tests/golden/smollm2/
  logits.json, by the HF model (fp32, cpu, like smollm2/) whose parameters are
  the checkpoint's own values: each projection the upstream dequantization
  (fp16 s * (q - z)), embeddings and norms the fp16 values, all cast to fp32.
  "source" names the versions, the GGUF's sha256 and the written
  model.safetensors' sha256 ("model.safetensors sha256 <hex>").
  tests/golden/smollm2_gptq_act/act_order.safetensors: the desc_act orders
  ("<module>.perm" int16 for q_proj (k, v), o_proj, gate_proj (up), down_proj;
  "<module>.dead" if any), written by the first run and read by later ones, so
  that the folders can be made again byte for byte (the sha256 above) without
  the calibration's floating-point sums deciding near ties differently.

Run on the GPU machine from the repository root (torch, transformers >= 5,
tokenizers, safetensors, numpy, gguf):
  python3 tests/golden/make_smollm2_int4_goldens.py --out-models /tmp/m --device cuda
(--recalibrate: new orders; --models-only: the folders alone, for the C++
test, from the committed orders.) Without torch, on a random SmolLM2-shaped
state dict (--fake-layers layers, tests/golden/tiny_llama's tokenizer), only
the folders (checked with
`onecard inspect` / `onecard generate`):
  python3 tests/golden/make_smollm2_int4_goldens.py --out-models /tmp/m --fake-layers 2
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "hf_int4"))
sys.path.insert(0, HERE)
import make_hf_int4_goldens as port  # noqa: E402

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CALIBRATION = os.path.join("tests", "data", "text", "sqlite-calibration.txt")
CALIBRATION_TOKENS = 4096
CALIBRATION_WINDOW = 1024
GROUP_SIZE = 64
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
SHARED_INPUT = (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
                ("mlp.gate_proj", "mlp.up_proj"))
# format: (checkpoint folder under --out-models, golden folder under tests/golden)
ACT_ORDER = os.path.join(HERE, "smollm2_gptq_act", "act_order.safetensors")
FORMATS = {"gptq_act": ("smollm2-gptq-act", "smollm2_gptq_act"),
           "awq": ("smollm2-awq", "smollm2_awq")}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


# ---- act order --------------------------------------------------------------

def act_orders(sum_sq, num_tokens):
    """GPTQ.quantize's desc_act order of each projection from the sums of x^2
    of its input columns: {module: (perm, dead)}. diag(H) = 2 / N sum x^2
    (process_batch); dead columns get H = 1 before the argsort."""
    for group in SHARED_INPUT:
        for layer in {m.rsplit(".", 2)[0] for m in sum_sq}:
            first = sum_sq[f"{layer}.{group[0]}"]
            for other in group[1:]:
                assert np.array_equal(first, sum_sq[f"{layer}.{other}"]), (layer, other)
    orders = {}
    for module, s in sum_sq.items():
        diag = 2.0 * s / num_tokens
        dead = diag == 0
        diag = np.where(dead, 1.0, diag)
        orders[module] = (np.argsort(-diag, kind="stable"), dead)
    return orders


# The projections whose input is their own: q (also k, v), o, gate (also up), down.
ORDER_OWNERS = {"self_attn.q_proj": SHARED_INPUT[0], "self_attn.o_proj": ("self_attn.o_proj",),
                "mlp.gate_proj": SHARED_INPUT[1], "mlp.down_proj": ("mlp.down_proj",)}


def save_act_orders(path, orders):
    """One int16 perm (and uint8 dead mask, if any) per distinct input."""
    tensors = {}
    for module, (perm, dead) in orders.items():
        if module.split(".", 3)[3] in ORDER_OWNERS:
            tensors[module + ".perm"] = perm.astype(np.int16)
            if dead.any():
                tensors[module + ".dead"] = dead.astype(np.uint8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path)


def load_act_orders(path):
    from safetensors.numpy import load_file
    tensors, orders = load_file(path), {}
    for key, perm in tensors.items():
        if not key.endswith(".perm"):
            continue
        owner = key[:-len(".perm")]
        layer, proj = owner.rsplit(".", 2)[0], owner.split(".", 3)[3]
        dead = tensors.get(owner + ".dead", np.zeros(perm.shape, np.uint8)).astype(bool)
        for member in ORDER_OWNERS[proj]:
            orders[f"{layer}.{member}"] = (perm.astype(np.int64), dead)
    return orders


# ---- quantization (numpy: the upstream ports) ------------------------------

def quantize_gptq_act(w, perm, dead, group):
    """GPTQ v1, asymmetric, desc_act: the module's tensors and the upstream
    dequantization (fp16 [n, k]) of what it stores."""
    w = w.copy()
    w[:, dead] = 0  # GPTQ.quantize: W[:, dead] = 0
    w_q, scales, zeros, g_idx = port.gptq_quantize(w, group, False, perm)
    qweight, qzeros_v2, scales16 = port.gptq_pack(w_q, scales, zeros, g_idx)
    qzeros = port.gptq_v2_to_v1(qzeros_v2)
    loaded = port.gptq_v1_to_v2(qzeros)  # what GPTQModel's loader makes of v1
    ref = port.gptq_dequantize(qweight, loaded, scales16, g_idx).T.copy()
    tensors = {"qweight": qweight, "qzeros": qzeros, "scales": scales16, "g_idx": g_idx}
    return tensors, ref, scales16.T[:, g_idx]  # per-element scale [n, k]


def quantize_awq(w, group):
    """AutoAWQ GEMM with zero points (no activation-aware scale search)."""
    w_q, scales, zeros = port.awq_pseudo_quantize(w, group)
    qweight, qzeros, scales16 = port.awq_from_linear(w_q, scales, zeros, group)
    ref = port.awq_dequantize_gemm(qweight, qzeros, scales16, group).T.copy()
    tensors = {"qweight": qweight, "qzeros": qzeros, "scales": scales16}
    return tensors, ref, np.repeat(scales16.T, group, axis=1)


def is_projection(name):
    return name.startswith("model.layers.") and name.endswith(".weight") and \
        name[:-len(".weight")].split(".", 3)[3] in PROJECTIONS


def quantize_state(fmt, state, orders, group, tied):
    """Every projection of `state` (fp32, HF names) in format `fmt`; the
    other tensors in fp16. Returns (tensors to save, reference fp32 state:
    the values the file holds, dequantized upstream)."""
    tensors, reference, worst = {}, {}, 0.0
    for name in sorted(state):
        w = state[name]
        if tied and name == "lm_head.weight":
            continue
        if not is_projection(name):
            tensors[name] = w.astype(np.float16)
            reference[name] = tensors[name].astype(np.float32)
            continue
        module = name[:-len(".weight")]
        assert w.shape[1] % group == 0, f"{name}: k = {w.shape[1]} is not a multiple of {group}"
        if fmt == "gptq_act":
            parts, ref, scale = quantize_gptq_act(w, *orders[module], group)
        else:
            parts, ref, scale = quantize_awq(w, group)
        for part, value in parts.items():
            tensors[f"{module}.{part}"] = value
        reference[name] = ref.astype(np.float32)
        # Sanity: round-to-nearest stays within a step of the weight.
        err = np.abs(reference[name] - w) / scale.astype(np.float32)
        if fmt == "gptq_act":
            err = err[:, ~orders[module][1]]
        worst = max(worst, float(err.max()))
    assert worst <= 1.0 + 1e-2, f"{fmt}: |dequantized - w| reaches {worst:.3f} steps"
    print(f"{fmt}: {sum(is_projection(n) for n in state)} projections, "
          f"max |dequantized - w| = {worst:.3f} steps", flush=True)
    return tensors, reference


def quantization_config(fmt, group, folder):
    """(config.json's quantization_config, quantize_config.json or None), as
    AutoGPTQ 0.7 (BaseQuantizeConfig.to_dict; save_quantized writes it to
    config.json, then sets model_name_or_path / model_file_base_name and
    writes quantize_config.json) and AutoAWQ (to_transformers_dict) write them."""
    if fmt == "awq":
        return ({"quant_method": "awq", "zero_point": True, "group_size": group, "bits": 4,
                 "version": "gemm", "modules_to_not_convert": None}, None)
    qc = {"bits": 4, "group_size": group, "damp_percent": 0.01, "desc_act": True,
          "static_groups": False, "sym": False, "true_sequential": True,
          "model_name_or_path": None, "model_file_base_name": None,
          "quant_method": "gptq", "checkpoint_format": "gptq"}
    return qc, dict(qc, model_name_or_path=folder, model_file_base_name="model")


def write_checkpoint(folder, fmt, tensors, config, group, save_tokenizer):
    """model.safetensors, config.json (+ quantize_config.json), tokenizer;
    returns model.safetensors' sha256."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    in_config, quantize_config = quantization_config(fmt, group, folder)
    # A config read from a GGUF has no architectures (transformers 5.17); the
    # tools write the model's class, and loaders need it.
    write_json(os.path.join(folder, "config.json"),
               dict(config, architectures=config.get("architectures") or ["LlamaForCausalLM"],
                    quantization_config=in_config, dtype="float16"))
    if quantize_config is not None:
        write_json(os.path.join(folder, "quantize_config.json"), quantize_config)
    save_tokenizer(folder)
    digest = sha256_file(path)
    print(f"{fmt}: wrote {folder} ({os.path.getsize(path) / 2**20:.1f} MiB, "
          f"sha256 {digest})", flush=True)
    return digest


def make_checkpoints(state, config, orders, out_models, save_tokenizer, group=GROUP_SIZE):
    """Both formats: {fmt: (reference fp32 state, model.safetensors sha256)}."""
    tied = bool(config.get("tie_word_embeddings", False))
    out = {}
    for fmt, (folder, _) in FORMATS.items():
        start = time.time()
        tensors, reference = quantize_state(fmt, state, orders, group, tied)
        digest = write_checkpoint(os.path.join(out_models, folder), fmt, tensors, config, group,
                                  save_tokenizer)
        print(f"{fmt}: {time.time() - start:.1f} s", flush=True)
        out[fmt] = (reference, digest)
    return out


# ---- fake state dict (no torch) ----------------------------------------------

def fake_model(num_layers, rng):
    """SmolLM2-135M's shapes and config with `num_layers` layers, random
    weights, tests/golden/tiny_llama's tokenizer (vocab 1005)."""
    tiny = json.load(open(os.path.join(ROOT, "tests", "golden", "tiny_llama", "config.json")))
    hidden, inter, heads, kv_heads, head_dim, vocab = 576, 1536, 9, 3, 64, tiny["vocab_size"]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
              "num_hidden_layers": num_layers, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "head_dim": head_dim, "hidden_act": "silu",
              "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
              "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
              "tie_word_embeddings": True, "bos_token_id": tiny["bos_token_id"],
              "eos_token_id": tiny["eos_token_id"], "attention_bias": False, "mlp_bias": False}
    shapes = {"self_attn.q_proj": (heads * head_dim, hidden),
              "self_attn.k_proj": (kv_heads * head_dim, hidden),
              "self_attn.v_proj": (kv_heads * head_dim, hidden),
              "self_attn.o_proj": (hidden, heads * head_dim),
              "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
              "mlp.down_proj": (hidden, inter)}
    state = {"model.embed_tokens.weight": rng.standard_normal((vocab, hidden)).astype(np.float32),
             "model.norm.weight": (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)}
    sum_sq = {}
    for i in range(num_layers):
        p = f"model.layers.{i}."
        for norm in ("input_layernorm", "post_attention_layernorm"):
            state[p + norm + ".weight"] = (1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        inputs = {"attn": rng.gamma(1.0, size=hidden), "o": rng.gamma(1.0, size=hidden),
                  "mlp": rng.gamma(1.0, size=hidden), "down": rng.gamma(1.0, size=inter)}
        inputs["mlp"][:3] = 0  # dead columns
        for proj, (n, k) in shapes.items():
            w = rng.standard_normal((n, k)) / np.sqrt(k)
            state[p + proj + ".weight"] = w.astype(np.float32)
            key = {"self_attn.o_proj": "o", "mlp.down_proj": "down"}.get(
                proj, "attn" if proj.startswith("self_attn") else "mlp")
            sum_sq[p + proj] = inputs[key]
    return state, config, sum_sq


def copy_tiny_tokenizer(folder):
    src = os.path.join(ROOT, "tests", "golden", "tiny_llama")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(src, name), folder)


def main_fake(args):
    state, config, sum_sq = fake_model(args.fake_layers, np.random.default_rng(17))
    orders = act_orders(sum_sq, num_tokens=CALIBRATION_TOKENS)
    path = os.path.join(args.out_models, "act_order.safetensors")
    save_act_orders(path, orders)
    loaded = load_act_orders(path)
    assert loaded.keys() == orders.keys() and all(
        np.array_equal(loaded[m][0], orders[m][0]) and np.array_equal(loaded[m][1], orders[m][1])
        for m in orders)
    make_checkpoints(state, config, loaded, args.out_models, copy_tiny_tokenizer, args.group_size)


# ---- Hugging Face (torch, transformers) ------------------------------------

def load_hf(gguf_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model_dir, gguf = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf, dtype=torch.float32)
    return tok, model.eval()


def projection_modules(model):
    for name, module in model.named_modules():
        parts = name.split(".", 3)
        if name.startswith("model.layers.") and len(parts) == 4 and parts[3] in PROJECTIONS:
            yield name, module


def calibration_sum_sq(model, tok, device):
    """Sum of x^2 of each input column of every projection (fp64) over the
    calibration windows, and the number of tokens."""
    import torch
    with open(os.path.join(ROOT, CALIBRATION), encoding="utf-8") as f:
        ids = tok(f.read(), add_special_tokens=False).input_ids[:CALIBRATION_TOKENS]
    assert len(ids) == CALIBRATION_TOKENS, len(ids)
    sums, handles = {}, []

    def hook(name):
        def accumulate(module, inputs, output):
            x = inputs[0].reshape(-1, inputs[0].shape[-1]).double()
            sums[name] = sums.get(name, 0) + (x * x).sum(0)
        return accumulate

    for name, module in projection_modules(model):
        handles.append(module.register_forward_hook(hook(name)))
    model.to(device)
    with torch.no_grad():
        for begin in range(0, len(ids), CALIBRATION_WINDOW):
            model(torch.tensor([ids[begin:begin + CALIBRATION_WINDOW]], device=device))
    model.to("cpu")
    for h in handles:
        h.remove()
    return {name: s.cpu().numpy() for name, s in sums.items()}, len(ids)


def load_reference(model, reference):
    """The model's parameters become the checkpoint's values (fp32)."""
    import torch
    params = dict(model.named_parameters())  # tied lm_head: only embed_tokens
    assert set(params) == set(reference), set(params) ^ set(reference)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(reference[name]))


def write_goldens(model, tok, golden_dir, source):
    """make_goldens.py's records on tests/golden/smollm2/logits.json's prompts."""
    import make_goldens
    base = json.load(open(os.path.join(HERE, "smollm2", "logits.json")))
    assert base["num_greedy"] == make_goldens.NUM_GREEDY
    os.makedirs(golden_dir, exist_ok=True)
    records = []
    for p in base["prompts"]:
        if tok(p["text"], add_special_tokens=False).input_ids != p["input_ids"]:
            print(f"warning: {p['name']}: the tokenizer's ids differ from smollm2/'s; "
                  "using smollm2/'s", flush=True)
        records.append(make_goldens.logits_record(model, p["name"], p["input_ids"],
                                                  base["sample_ids"], golden_dir,
                                                  {"text": p["text"], "chat": p["chat"]}))
        print(f"{os.path.basename(golden_dir)} {p['name']}: greedy "
              f"{records[-1]['greedy_ids'][:8]}...", flush=True)
    make_goldens.write_logits_json(golden_dir, source, base["sample_ids"], records)


def main_hf(args):
    import numpy
    import safetensors
    import torch
    import make_goldens
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    gguf_path = os.path.join(ROOT, args.gguf)
    tok, model = load_hf(gguf_path)
    config = json.loads(model.config.to_json_string())
    if config.get("tie_word_embeddings"):
        assert model.lm_head.weight is model.model.embed_tokens.weight
    if args.recalibrate or not os.path.exists(args.act_order):
        sum_sq, num_tokens = calibration_sum_sq(model, tok, args.device)
        orders = act_orders(sum_sq, num_tokens)
        save_act_orders(args.act_order, orders)
        print(f"act order: {len(orders)} projections, {num_tokens} tokens on {args.device}; "
              f"q/k/v and gate/up inputs equal bit for bit; saved to {args.act_order}", flush=True)
    else:
        orders = load_act_orders(args.act_order)
        print(f"act order: {len(orders)} projections from {args.act_order}", flush=True)
    state = {name: p.detach().cpu().numpy().copy() for name, p in model.named_parameters()}
    made = make_checkpoints(state, config, orders, args.out_models, tok.save_pretrained,
                            args.group_size)
    if args.models_only:
        return
    gguf_sha = sha256_file(gguf_path)
    describe = {
        "gptq_act": "GPTQ v1 (AutoGPTQ layout) desc_act, sym false, round-to-nearest in act "
                    f"order (argsort of diag(H) over {CALIBRATION_TOKENS} tokens of "
                    f"{CALIBRATION}, saved in act_order.safetensors, sha256 "
                    f"{sha256_file(args.act_order)})",
        "awq": "AutoAWQ GEMM, zero_point, round-to-nearest"}
    for fmt, (folder, golden) in FORMATS.items():
        reference, digest = made[fmt]
        load_reference(model, reference)
        source = (f"{make_goldens.versions()}, numpy {numpy.__version__}, safetensors "
                  f"{safetensors.__version__}; model {os.path.basename(gguf_path)} sha256 "
                  f"{gguf_sha}, weights dequantized by transformers' GGUF loader, then "
                  f"{describe[fmt]}, group {args.group_size}, by "
                  "tests/golden/make_smollm2_int4_goldens.py (the hf_int4 ports); "
                  f"{folder}/model.safetensors sha256 {digest}; the reference holds the "
                  "file's values: upstream fp16 dequantization of each projection, fp16 "
                  "embeddings and norms, in fp32")
        write_goldens(model, tok, os.path.join(HERE, golden), source)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-models", required=True, help="where the checkpoint folders go")
    parser.add_argument("--device", default="cpu", help="calibration device (the reference: cpu)")
    parser.add_argument("--gguf", default=os.path.join("models", GGUF))
    parser.add_argument("--group-size", type=int, default=GROUP_SIZE)
    parser.add_argument("--act-order", default=ACT_ORDER,
                        help="desc_act orders: read if present, else calibrated and written")
    parser.add_argument("--recalibrate", action="store_true",
                        help="calibrate and rewrite --act-order even if it exists")
    parser.add_argument("--models-only", action="store_true",
                        help="only the checkpoint folders (the test's files), no goldens")
    parser.add_argument("--fake-layers", type=int, default=0,
                        help="no torch: a random SmolLM2-shaped model of this many layers")
    args = parser.parse_args()
    start = time.time()
    (main_fake if args.fake_layers else main_hf)(args)
    print(f"done in {time.time() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
