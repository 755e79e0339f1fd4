#!/usr/bin/env python3
"""Write a tiny random-weight LLaMA model as GGUF, for real-server tests.

The vocabulary, merges and special tokens are copied from a vocab-only GGUF
that ships with llama.cpp (ggml-vocab-llama-bpe.gguf: Llama 3's byte-level
BPE); the weights are seeded random numbers (2 layers, n_embd 128), so the
server runs the real code paths at a tiny cost. The same vocabulary is also
written as a Hugging Face tokenizer.json (byte-level BPE with Llama 3's
pre-tokenizer, BOS added), so a client counts prompt tokens as the server
does. Nothing is downloaded.
"""

import argparse
import json

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType

N_EMBD = 128
N_HEAD = 4
N_LAYER = 2
N_FF = 256
N_CTX = 2048
SEED = 1234

# Llama 3's chat template, in the form llama.cpp recognises.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)

# Llama 3's pre-tokenizer split (what llama.cpp's "llama-bpe" pre-type does).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def field_value(reader, name):
    """A scalar or array field of a GGUF file, as Python values."""
    f = reader.fields[name]
    if f.types[0] == GGUFValueType.ARRAY:
        item = f.types[1]
        out = []
        for idx in f.data:
            part = f.parts[idx]
            out.append(bytes(part).decode("utf-8") if item == GGUFValueType.STRING else part.tolist()[0])
        return out
    part = f.parts[f.data[0]]
    if f.types[0] == GGUFValueType.STRING:
        return bytes(part).decode("utf-8")
    return part.tolist()[0]


def tokenizer_json(tokens, token_types, merges, bos_id):
    """The same vocabulary as a Hugging Face tokenizer.json."""
    special = [i for i, t in enumerate(token_types) if t == 3]  # CONTROL
    added = [
        {
            "id": i,
            "content": tokens[i],
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i in special
    ]
    bos = tokens[bos_id]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": LLAMA3_SPLIT},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": bos, "type_id": 1}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": merges,
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vocab", required=True, help="a vocab-only GGUF (llama-bpe)")
    ap.add_argument("--out", required=True, help="the model GGUF to write")
    ap.add_argument("--tokenizer-out", required=True, help="the tokenizer.json to write")
    a = ap.parse_args()

    reader = GGUFReader(a.vocab)
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    token_types = field_value(reader, "tokenizer.ggml.token_type")
    merges = field_value(reader, "tokenizer.ggml.merges")
    bos_id = field_value(reader, "tokenizer.ggml.bos_token_id")
    eos_id = field_value(reader, "tokenizer.ggml.eos_token_id")
    pre = field_value(reader, "tokenizer.ggml.pre")
    n_vocab = len(tokens)

    w = GGUFWriter(a.out, "llama")
    w.add_name("cicada-tiny-llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(1)  # mostly F16
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos_id)
    w.add_eos_token_id(eos_id)
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(SEED)

    def weight(shape, dtype=np.float16):
        return (rng.standard_normal(shape) * 0.02).astype(dtype)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", weight((n_vocab, N_EMBD)))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", weight((n_vocab, N_EMBD)))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "attn_q.weight", weight((N_EMBD, N_EMBD), np.float32))
        w.add_tensor(p + "attn_k.weight", weight((N_EMBD, N_EMBD), np.float32))
        w.add_tensor(p + "attn_v.weight", weight((N_EMBD, N_EMBD), np.float32))
        w.add_tensor(p + "attn_output.weight", weight((N_EMBD, N_EMBD), np.float32))
        w.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", weight((N_FF, N_EMBD), np.float32))
        w.add_tensor(p + "ffn_up.weight", weight((N_FF, N_EMBD), np.float32))
        w.add_tensor(p + "ffn_down.weight", weight((N_EMBD, N_FF), np.float32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    with open(a.tokenizer_out, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(tokens, token_types, merges, bos_id), f, ensure_ascii=False)

    # the tokenizer must load and add BOS like the server does
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(a.tokenizer_out)
    ids = t.encode("Hello world! 12345").ids
    assert ids[0] == bos_id, ids
    print(f"wrote {a.out} ({n_vocab} tokens) and {a.tokenizer_out}; 'Hello world! 12345' -> {ids}")


if __name__ == "__main__":
    main()
