#!/usr/bin/env python3
"""Makes the Hugging Face reference goldens that the CPU backend is held to.

Run with a Python that has torch, transformers (>= 5), gguf, accelerate,
tokenizers and safetensors (the repo used transformers 5.24.0, torch 2.15.0 on
CPU, fp32):

  python tests/golden/make_goldens.py smollm2   # needs models/SmolLM2-...gguf
  python tests/golden/make_goldens.py tiny      # needs the tiny tokenizers
  python tests/golden/make_goldens.py qwen2.5-coder [--device cuda|cpu]
      # needs models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
      # (scripts/fetch-model.sh qwen); fp32 on either device, TF32 off

Outputs (format: tests/golden/README.md):
  tests/golden/smollm2/logits.json + <prompt>.last.f32
  tests/golden/qwen2_5_coder/logits.json + <prompt>.last.f32
  tests/golden/tiny_llama/, tests/golden/tiny_qwen2/: seeded random checkpoints
  (config.json, safetensors, tokenizer.json, tokenizer_config.json) and their
  logits.json + *.last.f32.
Nothing here comes from onecard's own code.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
NUM_SAMPLE_IDS = 64
NUM_GREEDY = 32

LONG_TEXT = (
    "The history of computing is a story of people trying to make machines do arithmetic "
    "faster than they could do it by hand. Early mechanical calculators, built from gears "
    "and levers, could add and subtract, and a few could multiply. In the nineteenth "
    "century Charles Babbage designed the Difference Engine and later the Analytical "
    "Engine, a machine that would have been programmable with punched cards, and Ada "
    "Lovelace wrote what many consider the first published algorithm intended for such a "
    "machine. Neither engine was completed in Babbage's lifetime. The twentieth century "
    "brought electromechanical relays and then vacuum tubes. Machines such as the Harvard "
    "Mark I, Colossus and ENIAC filled entire rooms, consumed enormous amounts of power and "
    "failed often, yet they computed artillery tables, broke ciphers and simulated physical "
    "processes that had been out of reach. The invention of the transistor in 1947 changed "
    "everything: it was smaller, faster, cheaper and far more reliable than the tube. "
    "Integrated circuits followed in the late 1950s, placing many transistors on a single "
    "piece of silicon, and the number of transistors per chip began doubling roughly every "
    "two years, an observation that became known as Moore's law. Minicomputers brought "
    "computing to laboratories and small companies; microprocessors in the 1970s made the "
    "personal computer possible. Software grew alongside hardware. Assembly language gave "
    "way to FORTRAN, COBOL and LISP, then to C, which was used to write the UNIX operating "
    "system, and later to object-oriented languages such as C++ and Java. Networks linked "
    "machines together: ARPANET in 1969, then the wider Internet, and in 1991 the World "
    "Wide Web, which turned the network into a medium that ordinary people used every day. "
    "Graphics processors, first built to draw triangles for games, turned out to be "
    "excellent at the dense linear algebra behind neural networks, and in the 2010s deep "
    "learning moved from research curiosity to industrial practice. Large language models, "
    "trained on vast amounts of text, can now write, summarize and translate. Serving them "
    "efficiently is itself an engineering problem: the weights must be read from memory for "
    "every generated token, so the speed of a single answer is bounded by memory bandwidth, "
    "while many answers at once can share each read of the weights. Schedulers batch "
    "requests continuously, caches keep the attention keys and values of earlier tokens, and "
    "careful kernels squeeze the hardware. Looking back, each generation of engineers has "
    "faced the same question in a new form: how do we do more useful work with the machine "
    "we have? The answers have ranged from clever circuits to clever algorithms, and the "
    "story is far from over. In the next chapter we look at how memory hierarchies shaped "
    "the design of modern processors, from registers and caches to main memory and disks,"
)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def logits_record(model, name, input_ids, sample_ids, out_dir, extra, device="cpu"):
    """Runs the reference over input_ids; returns the JSON record for one prompt."""
    ids = torch.tensor([input_ids], dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(ids).logits[0].float().cpu()  # [seq, vocab]
        # An explicit mask: the pad id equals EOS, and without it generate would
        # mask the prompt's own <|im_end|> tokens. repetition_penalty 1: plain
        # greedy whatever generation defaults the model came with.
        gen = model.generate(ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=NUM_GREEDY, do_sample=False,
                             repetition_penalty=1.0,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=model.config.eos_token_id, eos_token_id=None)
    greedy = gen.sequences[0, len(input_ids):].tolist()
    step_logits = torch.stack([l[0].float().cpu() for l in gen.logits])  # [steps, vocab]
    # Plain greedy: each token is the argmax of its step's raw logits.
    assert greedy == step_logits.argmax(dim=-1).tolist(), f"{name}: generate was not greedy"
    top2 = torch.topk(step_logits, 2, dim=-1)
    top5 = torch.topk(logits, 5, dim=-1)
    last_file = f"{name}.last.f32"
    logits[-1].numpy().astype("<f4").tofile(os.path.join(out_dir, last_file))
    rec = {
        "name": name,
        "input_ids": list(map(int, input_ids)),
        "top5_ids": top5.indices.tolist(),
        "top5_logits": [[round(float(v), 6) for v in row] for row in top5.values],
        "sample_logits": [[round(float(v), 6) for v in row]
                          for row in logits[:, sample_ids]],
        "greedy_ids": greedy,
        "greedy_top2_ids": top2.indices.tolist(),
        "greedy_top2_logits": [[round(float(v), 6) for v in row] for row in top2.values],
        "last_logits_file": last_file,
    }
    rec.update(extra)
    return rec


def write_logits_json(out_dir, source, sample_ids, records):
    doc = {"source": source, "sample_ids": sample_ids, "num_greedy": NUM_GREEDY,
           "prompts": records}
    with open(os.path.join(out_dir, "logits.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def versions():
    return f"transformers {transformers.__version__}, torch {torch.__version__}, cpu, fp32"


def make_smollm2():
    model_dir = os.path.join(ROOT, "models")
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf, dtype=torch.float32)
    model.eval()
    out_dir = os.path.join(GOLDEN, "smollm2")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(1234)
    sample_ids = sorted(rng.choice(model.config.vocab_size, NUM_SAMPLE_IDS, replace=False).tolist())
    chat = [{"role": "user", "content": "What is the tallest mountain in the world?"}]
    chat_text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    prompts = [
        ("capital", "The capital of France is", False),
        ("chat", chat_text, True),
        ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("mixed", "科创板 is a stock market in Shanghai. 🚀 Numbers: 12345 + 678 =", False),
        ("long", LONG_TEXT, False),
    ]
    records = []
    for name, text, is_chat in prompts:
        ids = tok(text, add_special_tokens=False).input_ids
        print(f"smollm2 {name}: {len(ids)} tokens", flush=True)
        records.append(logits_record(model, name, ids, sample_ids, out_dir,
                                     {"text": text, "chat": is_chat}))
    source = (f"{versions()}; model {gguf} sha256 {sha256(os.path.join(model_dir, gguf))}; "
              "weights dequantized by transformers' GGUF loader")
    write_logits_json(out_dir, source, sample_ids, records)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="*", default=["smollm2", "tiny"],
                        choices=["smollm2", "tiny", "qwen2.5-coder"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where qwen2.5-coder runs (fp32 either way, TF32 off)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if "smollm2" in args.what:
        make_smollm2()
    if "tiny" in args.what:
        from make_tiny_checkpoints import make_tiny  # noqa: E402
        make_tiny(logits_record, write_logits_json, versions, NUM_SAMPLE_IDS)
    if "qwen2.5-coder" in args.what:
        from make_qwen_goldens import make_qwen  # noqa: E402
        make_qwen(args.device, logits_record, write_logits_json, sha256, NUM_SAMPLE_IDS)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
