#!/usr/bin/env python3
"""Makes the tokenizer goldens under tests/golden/tokenizer/ (expected ids from HF).

Run from the source root:  /tmp/goldenv/bin/python tests/golden/tokenizer/make_tokenizer_goldens.py
Needs transformers, tokenizers, gguf (for the SmolLM2 part) and
models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).

Writes:
  smollm2/{tokenizer.json,tokenizer_config.json}   SmolLM2's HF tokenizer, as transformers
                                                   builds it from the GGUF
  tiny_llama3/{tokenizer.json,tokenizer_config.json}  ~1000-vocab byte-level BPE trained here
                                                   with Llama-3's Split regex and specials
  tiny_qwen2/{...}                                 the same with Qwen2's regex and specials
  tiny_added/{...}                                 tiny_qwen2 plus added tokens with
                                                   lstrip/rstrip/single_word/normalized set
  tiny_nfc/{...}                                   tiny_qwen2 with Qwen2's NFC normalizer
  <name>/golden.json   for each: the stress strings with ids (without and with special
                       tokens), HF decodes of those ids, and chat-templated conversations
                       (apply_chat_template tokenize=False and tokenize=True).
The tests in tests/engine/tokenizer/ read golden.json; nothing here comes from onecard code.
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers
from tokenizers import trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
GGUF = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# The pre-tokenizer regexes of the real tokenizer.json files (Split, behavior Isolated).
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Llama-3-8B-Instruct's template (content is trimmed; bos before the first message).
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
# Qwen2-Instruct's ChatML template with its default system prompt.
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# Training text for the tiny tokenizers: a few KB of varied text.
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's what they're doing, isn't it?",
    "We'll see. I'd say you've got it. They'll come; he's here and she's there.",
    "Hello world! Hello, world. HELLO WORLD. hello there, general Kenobi.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 2048 65536 3.14159 2.71828 1e-5.",
    "Dates like 2024-06-01 and times like 12:34:56; prices $19.99, €5, £3.50, ¥1000.",
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i * i)\n",
    "int main(int argc, char** argv) {\n  std::vector<int> v = {1, 2, 3};\n  return 0;\n}\n",
    "if (x != nullptr && x->size() > 0) { y += x[0]; } else { y -= 1; }",
    "<html><body><p class=\"note\">Some text &amp; more</p></body></html>",
    "科创板是上海证券交易所设立的板块。人工智能正在改变世界。我们今天去公园散步吧。",
    "日本語のテキストも少し入れておきます。こんにちは、世界。ありがとうございます。",
    "한국어 문장도 조금 있습니다. 안녕하세요, 세계.",
    "Привет, мир! Как дела? Это тестовый текст на русском языке.",
    "Γειά σου κόσμε! Αυτό είναι ένα δοκιμαστικό κείμενο στα ελληνικά.",
    "مرحبا بالعالم! هذا نص تجريبي باللغة العربية.",
    "नमस्ते दुनिया! यह हिंदी में एक परीक्षण पाठ है।",
    "Café, naïve, résumé, façade, jalapeño, Zürich, São Paulo, Ångström, Øresund.",
    "Emoji: 😀 😃 😄 👍 👍🏽 ❤️ 🎉 🚀 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 🇯🇵",
    "Tabs\tand\tnewlines\nare\n\nhere   with   many    spaces.\r\nWindows line end.",
    "Markdown: # Title\n\n- item one\n- item two\n\n```python\nprint('hi')\n```\n",
    "JSON: {\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": true, \"b\": null}}",
    "URLs like https://example.com/path?query=1&other=two#frag and emails a.b@c.org.",
    "Mixed: abc123def 456ghi JKL789 mno_pqr-stu.vwx/yz",
    "The model said: \"I can't do that, Dave.\" Then it stopped. THE END.",
    "SmolLM and Llama and Qwen are language models; they read tokens and write tokens.",
]
CORPUS = CORPUS * 4

STRESS = [
    "",
    " ",
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "trailing space ",
    "   three leading and two trailing  ",
    "a  b   c    d     e",
    "tabs\tand\t\ttabs",
    "line\nbreaks\n\n\nand\r\nwindows\r\n",
    "\n\n\n",
    " \n \n\t \n",
    "科创板",
    "科创板是上海证券交易所设立的板块。",
    "日本語のテキスト、こんにちは。",
    "한국어 안녕하세요",
    "😀",
    "👍🏽 thumbs",
    "family 👨‍👩‍👧‍👦 and flag 🏳️‍🌈 and 🇫🇷🇯🇵",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Привет, мир!",
    "Γειά σου κόσμε",
    "mixed English 中文 русский عربى हिन्दी Ελληνικά 😀 end",
    "1234567890",
    "3.14159265358979 and 1000000 and 00042",
    "in 2024 there were 1,234,567 people",
    "def add(a, b):\n    return a + b\n",
    "int main() {\n\tstd::cout << \"hi\\n\";\n\treturn 0;\n}",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "<|im_start|>user\nhello<|im_end|>\n",
    "text<|im_end|>more",
    "<|endoftext|>",
    "a <|im_start|> b",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|eot_id|><|end_of_text|>",
    "<|im_start|",
    "It's they're we've I'm you'll he'd it't",
    "IT'S THEY'RE WE'VE I'M YOU'LL HE'D",
    "She'LL say 'quoted' words 's",
    "café naïve résumé façade jalapeño Zürich",
    "e\u0301 combining accent",
    "Ångström Øresund ß ǅ ﬁ",
    "!!!???...,,,;;;:::",
    "   ",
    "\t",
    "a\u00a0b\u2003c",
    "zero\u200bwidth",
    "next\u0085line and\u3000ideographic\u2028separator",
    "\r\n\r\n  \r\n",
    " " * 100 + "x" + "\n" * 40,
    "tab\t\t\t then 's and 'Ll",
    "\u200d\ufeff\U0001F9D1\u200d\U0001F4BB",
    "Cafe\u0301 cre\u0300me A\u030A \u212B \u1100\u1161\u11A8 \ufb01 \u2126",
    "\u00ff\u0100\ufffd",
    "https://example.com/path?query=1&other=two#frag",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": true}}",
    ("The quick brown fox jumps over the lazy dog. " * 3).strip(),
]


def long_text():
    """A ~3k-token text that mixes everything (the cache and speed case)."""
    parts = []
    for i in range(12):
        parts.append(CORPUS[i % len(CORPUS)])
        parts.append(STRESS[(i * 7) % len(STRESS)])
        parts.append(f"Paragraph {i}: value={i * 12345} ratio={i / 7:.5f}\n")
    return "\n".join(parts * 3)


CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a pirate."},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Tell me about 科创板 😀"},
     {"role": "assistant", "content": "It is a board of the Shanghai exchange."},
     {"role": "user", "content": "  And more?\n"}],
    [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello."},
     {"role": "user", "content": "Bye"}],
]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def make_golden(name, raw, hf, strings):
    """raw: a tokenizers.Tokenizer; hf: the transformers tokenizer of the same files."""
    cases = []
    for s in strings:
        ids = raw.encode(s, add_special_tokens=False).ids
        ids_special = raw.encode(s, add_special_tokens=True).ids
        assert hf.encode(s, add_special_tokens=False) == ids, (name, s)
        assert hf.encode(s, add_special_tokens=True) == ids_special, (name, s)
        # The pre-tokenizer's words (byte-level strings) for the whole text.
        words = [w for w, _ in raw.pre_tokenizer.pre_tokenize_str(s)]
        cases.append({
            "text": s, "ids": ids, "ids_with_special": ids_special, "words": words,
            "decoded": raw.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": raw.decode(ids, skip_special_tokens=True),
        })
    chats = []
    for conv in CONVERSATIONS:
        for gen in (True, False):
            text = hf.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            ids = hf.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            chats.append({"messages": conv, "add_generation_prompt": gen,
                          "text": text, "ids": list(ids)})
    added = json.loads(raw.to_str())["added_tokens"]
    info = {"vocab_size": raw.get_vocab_size(with_added_tokens=True),
            "bos_id": hf.bos_token_id, "eos_id": hf.eos_token_id,
            "special_ids": sorted(t["id"] for t in added if t["special"]),
            "token_ids": {t["content"]: t["id"] for t in added}}
    write_json(os.path.join(HERE, name, "golden.json"),
               {"tokenizer": name, "info": info, "cases": cases, "chats": chats})
    print(f"{name}: {len(cases)} strings, {len(chats)} chats, vocab {raw.get_vocab_size()}")


def train_tiny(regex, specials, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def save_tiny(name, tok, config, post_processor=None, model_extra=None):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    j = json.loads(tok.to_str())
    if post_processor is not None:
        j["post_processor"] = post_processor
    if model_extra:
        j["model"].update(model_extra)
    write_json(os.path.join(out, "tokenizer.json"), j)
    config = dict(config)
    config.setdefault("tokenizer_class", "PreTrainedTokenizerFast")
    config.setdefault("clean_up_tokenization_spaces", False)
    write_json(os.path.join(out, "tokenizer_config.json"), config)
    return out


def make_tiny_llama3():
    tok = train_tiny(LLAMA3_REGEX, LLAMA3_SPECIALS, 1000)
    bos = tok.token_to_id("<|begin_of_text|>")
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                     "ids": [bos],
                                                     "tokens": ["<|begin_of_text|>"]}}}
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
              "chat_template": LLAMA3_TEMPLATE, "model_max_length": 8192}
    # Llama-3's tokenizer.json sets ignore_merges: whole words found in the vocab win.
    return save_tiny("tiny_llama3", tok, config, post, {"ignore_merges": True})


def make_tiny_qwen2():
    tok = train_tiny(QWEN2_REGEX, QWEN2_SPECIALS, 1000)
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "chat_template": QWEN2_TEMPLATE, "model_max_length": 32768}
    return save_tiny("tiny_qwen2", tok, config)


def make_tiny_nfc(qwen_dir):
    """tiny_qwen2 with the NFC normalizer of the real Qwen2 tokenizer.json files."""
    tok = Tokenizer.from_file(os.path.join(qwen_dir, "tokenizer.json"))
    tok.normalizer = normalizers.NFC()
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "chat_template": QWEN2_TEMPLATE}
    return save_tiny("tiny_nfc", tok, config)


def make_tiny_added(qwen_dir):
    """tiny_qwen2 plus added tokens using HF's lstrip/rstrip/single_word/normalized."""
    tok = Tokenizer.from_file(os.path.join(qwen_dir, "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True,
                                       normalized=False)])
    tok.add_special_tokens([AddedToken("[SEP]", lstrip=False, rstrip=True, special=True,
                                       normalized=False)])
    tok.add_tokens([AddedToken("hello world", normalized=False),
                    AddedToken("fox", single_word=True, normalized=False),
                    AddedToken(" dog", normalized=True)])
    config = {"bos_token": None, "eos_token": "<|endoftext|>",
              "chat_template": QWEN2_TEMPLATE}
    return save_tiny("tiny_added", tok, config)


ADDED_STRESS = [
    "a <mask> b", "a<mask>b", "  <mask>  x", "x [SEP]  y", "x[SEP]\n\ny",
    "hello world", "say hello world!", "hello  world", "fox foxes firefox fox.",
    "a fox", "the dog ran", "hotdog dog", "<mask>[SEP]<mask>",
]


def make_smollm2():
    out = os.path.join(HERE, "smollm2")
    os.makedirs(out, exist_ok=True)
    hf = AutoTokenizer.from_pretrained(os.path.dirname(GGUF), gguf_file=os.path.basename(GGUF))
    raw = hf.backend_tokenizer
    hf.save_pretrained(out)
    for f in os.listdir(out):
        if f not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(out, f))
    raw.save(os.path.join(out, "tokenizer.json"), pretty=False)
    # transformers 5 saves the template as chat_template.jinja; keep it in the
    # config, as the hub's tokenizer_config.json files do.
    cfg_path = os.path.join(out, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8"))
    for k in ("is_local", "local_files_only", "backend"):
        cfg.pop(k, None)
    cfg["chat_template"] = hf.chat_template
    cfg["add_bos_token"] = False
    write_json(cfg_path, cfg)
    # The hub's SmolLM2 tokenizer.json pre-tokenizes with Digits(individual) then
    # ByteLevel (llama.cpp calls it "smollm"); transformers' GGUF loader uses
    # ByteLevel alone. Check the two agree on every golden string.
    j = json.loads(raw.to_str())
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": True}]}
    digits = Tokenizer.from_str(json.dumps(j))
    strings = STRESS + [long_text()]
    for s in strings:
        assert digits.encode(s, add_special_tokens=False).ids == \
            raw.encode(s, add_special_tokens=False).ids, s
    reloaded = PreTrainedTokenizerFast.from_pretrained(out)
    assert reloaded.chat_template == hf.chat_template
    make_golden("smollm2", Tokenizer.from_file(os.path.join(out, "tokenizer.json")),
                reloaded, strings)
    assert json.load(open(os.path.join(out, "golden.json")))["cases"][1]["ids"] == \
        hf.encode(STRESS[1], add_special_tokens=False)


def main():
    strings = STRESS + [long_text()]
    llama_dir = make_tiny_llama3()
    qwen_dir = make_tiny_qwen2()
    added_dir = make_tiny_added(qwen_dir)
    nfc_dir = make_tiny_nfc(qwen_dir)
    for name, d, extra in (("tiny_llama3", llama_dir, []), ("tiny_qwen2", qwen_dir, []),
                           ("tiny_added", added_dir, ADDED_STRESS), ("tiny_nfc", nfc_dir, [])):
        make_golden(name, Tokenizer.from_file(os.path.join(d, "tokenizer.json")),
                    PreTrainedTokenizerFast.from_pretrained(d), strings + extra)
    if "--no-smollm2" not in sys.argv:
        make_smollm2()


if __name__ == "__main__":
    main()
