#!/usr/bin/env python3
"""Write a tiny random-weight LoRA adapter, as GGUF, for the tiny model of make_tiny_gguf.py.

For cicada's test of llama-server serving LoRA adapters (`--lora FILE`, chosen
per request by `"lora": [{"id": N, "scale": S}]`). Nothing is downloaded.
The file is what llama.cpp's convert_lora_to_gguf.py writes for a PEFT
adapter: general.type = "adapter", general.architecture = the base model's,
adapter.type = "lora", adapter.lora.alpha; for each attention and
feed-forward weight W of each block (attn_q, attn_k, attn_v, attn_output,
ffn_gate, ffn_up, ffn_down), the pair `W.lora_a` (rank x n_in) and
`W.lora_b` (n_out x rank), float32, seeded random (B is not zero, so the
adapter changes what the model writes). The shapes are read from the base
GGUF, so the adapter fits whatever make_tiny_gguf.py wrote.

Usage: make_tiny_gguf_lora.py --base MODEL.gguf --out ADAPTER.gguf [--seed N]
(run with the python of llama-server.sh's tool venv: it needs gguf and numpy).
"""

import argparse

import numpy as np
from gguf import GGUFReader, GGUFWriter

RANK = 8
WEIGHTS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the base model's GGUF")
    ap.add_argument("--out", required=True, help="the adapter GGUF to write")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random weights")
    a = ap.parse_args()

    base = GGUFReader(a.base)
    arch_field = base.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode("utf-8")
    # ggml's shape is (n_in, n_out): numpy's (n_out, n_in) reversed
    shapes = {
        t.name: tuple(int(d) for d in t.shape)
        for t in base.tensors
        if t.name.endswith(".weight") and t.name.split(".")[-2] in WEIGHTS
    }
    if not shapes:
        raise SystemExit(f"{a.base}: no attention or feed-forward weights to adapt")

    rng = np.random.default_rng(a.seed)
    w = GGUFWriter(a.out, arch)
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(2 * RANK))
    for name, (n_in, n_out) in sorted(shapes.items()):
        lora_a = (rng.standard_normal((RANK, n_in)) / n_in**0.5).astype(np.float32)
        lora_b = (rng.standard_normal((n_out, RANK)) / RANK**0.5).astype(np.float32)
        w.add_tensor(name + ".lora_a", lora_a)
        w.add_tensor(name + ".lora_b", lora_b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: LoRA rank {RANK} over {len(shapes)} weights of {arch}, seed {a.seed}")


if __name__ == "__main__":
    main()
