#!/usr/bin/env python3
"""Write a tiny random-weight PEFT LoRA adapter for the tiny Llama of make_tiny_hf_model.py.

For cicada's test of vLLM serving LoRA adapters (`--enable-lora
--lora-modules name=DIR`). Nothing is downloaded; PEFT itself is not needed:
the adapter is the two files PEFT saves, written by hand:

- adapter_config.json: a plain LoRA (peft_type LORA, task CAUSAL_LM) of rank
  RANK and alpha 2 * RANK on every attention and MLP projection (q, k, v, o,
  gate, up, down), no bias, no modules_to_save;
- adapter_model.safetensors: for each projection of each layer,
  `base_model.model.model.layers.<i>.<block>.<proj>.lora_A.weight`
  (rank x in_features) and `...lora_B.weight` (out_features x rank), float32,
  random from the given seed (B is not zero, so the adapter changes the
  model's output: a server that ignored it would still answer, but not the
  same).

The shapes are read from the base model's config.json, so the adapter fits
whatever make_tiny_hf_model.py wrote.

Usage: make_tiny_lora.py --base MODEL_DIR --out DIR [--seed N]
(run with the python of vLLM's venv: it needs torch and safetensors).
"""

import argparse
import hashlib
import json
import os

import torch
from safetensors.torch import save_file

RANK = 8


def projections(cfg):
    """(block, name, in_features, out_features) of each projection of one layer."""
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // cfg["num_attention_heads"]
    q_out = cfg["num_attention_heads"] * head_dim
    kv_out = cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * head_dim
    inter = cfg["intermediate_size"]
    return [
        ("self_attn", "q_proj", hidden, q_out),
        ("self_attn", "k_proj", hidden, kv_out),
        ("self_attn", "v_proj", hidden, kv_out),
        ("self_attn", "o_proj", q_out, hidden),
        ("mlp", "gate_proj", hidden, inter),
        ("mlp", "up_proj", hidden, inter),
        ("mlp", "down_proj", inter, hidden),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the base model's directory (its config.json)")
    ap.add_argument("--out", required=True, help="directory to write (created)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random weights")
    a = ap.parse_args()
    with open(os.path.join(a.base, "config.json")) as f:
        cfg = json.load(f)
    os.makedirs(a.out, exist_ok=True)

    gen = torch.Generator().manual_seed(a.seed)
    tensors = {}
    for layer in range(cfg["num_hidden_layers"]):
        for block, name, fan_in, fan_out in projections(cfg):
            prefix = f"base_model.model.model.layers.{layer}.{block}.{name}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(RANK, fan_in, generator=gen) / fan_in**0.5
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(fan_out, RANK, generator=gen) / RANK**0.5
    save_file(tensors, os.path.join(a.out, "adapter_model.safetensors"), metadata={"format": "pt"})

    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": os.path.abspath(a.base),
        "r": RANK,
        "lora_alpha": 2 * RANK,
        "lora_dropout": 0.0,
        "target_modules": [p[1] for p in projections(cfg)],
        "bias": "none",
        "fan_in_fan_out": False,
        "modules_to_save": None,
        "use_rslora": False,
        "use_dora": False,
        "inference_mode": True,
    }
    with open(os.path.join(a.out, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    digest = hashlib.sha256()
    for name in sorted(os.listdir(a.out)):
        with open(os.path.join(a.out, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    print(f"wrote {a.out}: LoRA rank {RANK}, {len(tensors)} tensors, seed {a.seed}, sha256 {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
