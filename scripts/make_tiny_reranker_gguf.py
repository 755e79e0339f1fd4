#!/usr/bin/env python3
"""Write a tiny random-weight Qwen3 reranker as GGUF, for real-server tests.

llama.cpp ranks with a model whose pooling is `rank` and that carries a
classification head: Qwen3's `cls.output` tensor (what llama.cpp's
converter writes for Qwen3-Reranker). The vocabulary is the same Llama 3
byte-level BPE as `make_tiny_gguf.py`'s (so its tokenizer.json counts this
model's tokens too); the weights are seeded random numbers (2 layers,
n_embd 128). Nothing is downloaded.
"""

import argparse
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, PoolingType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_gguf import field_value  # noqa: E402

N_EMBD = 128
N_HEAD = 4
HEAD_DIM = N_EMBD // N_HEAD
N_LAYER = 2
N_FF = 256
N_CTX = 2048
SEED = 4321



def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vocab", required=True, help="a vocab-only GGUF (llama-bpe)")
    ap.add_argument("--out", required=True, help="the model GGUF to write")
    a = ap.parse_args()

    reader = GGUFReader(a.vocab)
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    token_types = field_value(reader, "tokenizer.ggml.token_type")
    merges = field_value(reader, "tokenizer.ggml.merges")
    bos_id = field_value(reader, "tokenizer.ggml.bos_token_id")
    eos_id = field_value(reader, "tokenizer.ggml.eos_token_id")
    pre = field_value(reader, "tokenizer.ggml.pre")
    n_vocab = len(tokens)

    w = GGUFWriter(a.out, "qwen3")
    w.add_name("cicada-tiny-reranker")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_pooling_type(PoolingType.RANK)
    w.add_classifier_output_labels(["yes"])
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

    rng = np.random.default_rng(SEED)

    def weight(shape, dtype=np.float32):
        return (rng.standard_normal(shape) * 0.02).astype(dtype)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", weight((n_vocab, N_EMBD), np.float16))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    # the rank head: one score per (query, document) pair
    w.add_tensor("cls.output.weight", weight((1, N_EMBD)))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "attn_q.weight", weight((N_EMBD, N_EMBD)))
        w.add_tensor(p + "attn_k.weight", weight((N_EMBD, N_EMBD)))
        w.add_tensor(p + "attn_v.weight", weight((N_EMBD, N_EMBD)))
        w.add_tensor(p + "attn_output.weight", weight((N_EMBD, N_EMBD)))
        w.add_tensor(p + "attn_q_norm.weight", ones(HEAD_DIM))
        w.add_tensor(p + "attn_k_norm.weight", ones(HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", weight((N_FF, N_EMBD)))
        w.add_tensor(p + "ffn_up.weight", weight((N_FF, N_EMBD)))
        w.add_tensor(p + "ffn_down.weight", weight((N_EMBD, N_FF)))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({n_vocab} tokens, rank pooling)")


if __name__ == "__main__":
    main()
