#!/usr/bin/env python3
"""Write a tiny random-weight LlamaForCausalLM and its tokenizer, for vLLM tests.

The model: hidden 64, 2 heads (head dim 32: vLLM's CPU attention needs head
sizes of 32, 64 or 80 and up), 2 layers, intermediate 128, 2048 positions,
float32, random weights from a fixed seed.

The tokenizer: byte-level, one token per character. The vocabulary is the
special tokens, then every printable ASCII character and the newline, each
in GPT-2's byte-to-unicode spelling, as a BPE model with no merges; a
ByteLevel pre-tokenizer and decoder (anything else is `<unk>`); `<s>` put in
front of every encoded text; a chat template. So:
  - any run of token ids decodes to text that encodes back to exactly those
    ids, which is what clients that build prompts from token ids (vllm
    bench's random data set, cicada's) rely on;
  - decoding is the plain concatenation of the tokens' bytes, the contract
    structured-output backends (xgrammar) build their token masks on: a
    grammar-forced answer decodes to exactly the JSON the grammar allowed.
    (Version 1 of this model had a word-level vocabulary without a decoder:
    decoding put spaces between tokens and xgrammar could not use it.)
Written as tokenizer.json, tokenizer_config.json (with
`tokenizer_class: PreTrainedTokenizerFast` and `chat_template`) and
special_tokens_map.json, by hand, so the files do not depend on how a
transformers release likes to save a tokenizer.

Nothing is downloaded; the same seed and versions write the same files.
"""

import argparse
import hashlib
import json
import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 1234
MAX_LEN = 2048
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
# <s> first, like Llama's templates; the rendered prompt is tokenized without
# adding special tokens, so the template supplies it.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "{{ '<|' + m['role'] + '|> ' + m['content'] + ' ' + eos_token + ' ' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|> ' }}{% endif %}"
)
# printable ASCII and the newline: every character a prompt or JSON needs
CHARS = [chr(c) for c in range(0x20, 0x7F)] + ["\n"]


def bytes_to_unicode():
    """GPT-2's reversible map of bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def build_vocab():
    vocab = {}
    spell = bytes_to_unicode()
    for t in SPECIAL + ["".join(spell[b] for b in c.encode()) for c in CHARS]:
        vocab.setdefault(t, len(vocab))
    return vocab


def write_tokenizer(out, vocab):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])]
    )
    tok.add_special_tokens(SPECIAL)
    tok.save(os.path.join(out, "tokenizer.json"))

    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    config = dict(special)
    config.update(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": MAX_LEN,
            "clean_up_tokenization_spaces": False,
            "chat_template": CHAT_TEMPLATE,
            "added_tokens_decoder": {
                str(vocab[t]): {
                    "content": t,
                    "lstrip": False,
                    "normalized": False,
                    "rstrip": False,
                    "single_word": False,
                    "special": True,
                }
                for t in SPECIAL
            },
        }
    )
    for name, obj in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    return tok


def write_model(out, vocab):
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=MAX_LEN,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)


def check(out, vocab, tok):
    """Load what was written the way vLLM will, and check the promises above."""
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(out).vocab_size == len(vocab) == len(SPECIAL) + len(CHARS)
    hf = AutoTokenizer.from_pretrained(out)
    assert len(hf) == len(vocab), len(hf)
    text = 'The cat sat on the hill, {"n": 12}.\n'
    ids = hf(text).input_ids
    assert ids[0] == vocab["<s>"] and len(ids) == 1 + len(text) and vocab["<unk>"] not in ids, ids
    assert hf.decode(ids, skip_special_tokens=True) == text
    # every id, in runs and shuffled: decodes to its bytes, encodes back to itself
    plain = list(range(len(SPECIAL), len(vocab)))
    for sample in (plain, plain[::-1], plain[::7] * 3, plain[5:9] * 20):
        decoded = hf.decode(sample)
        assert decoded == "".join(hf.decode([i]) for i in sample), "decoding is not concatenation"
        assert hf(decoded, add_special_tokens=False).input_ids == sample, "ids do not round-trip"
    prompt = hf.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there!"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt == "<s><|system|> Be brief. </s> <|user|> Hello there! </s> <|assistant|> ", prompt
    return ids, prompt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory to write (created)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    vocab = build_vocab()
    tok = write_tokenizer(a.out, vocab)
    write_model(a.out, vocab)
    ids, prompt = check(a.out, vocab, tok)

    digest = hashlib.sha256()
    for name in sorted(os.listdir(a.out)):
        with open(os.path.join(a.out, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    print(f"wrote {a.out}: vocab {len(vocab)}, seed {SEED}, files sha256 {digest.hexdigest()[:16]}")
    print(f"  a 36-character text -> {len(ids)} ids (with <s>)")
    print(f"  chat prompt: {prompt!r}")


if __name__ == "__main__":
    main()
