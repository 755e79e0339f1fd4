#!/usr/bin/env python3
"""Write a tiny random-weight Whisper model, its tokenizer and feature extractor.

For cicada's `openai-audio` test against vLLM's `/v1/audio/transcriptions`.
Everything is built here, nothing is downloaded:

- the model: WhisperForConditionalGeneration with d_model 64, 2 heads (head
  dim 32, what vLLM's CPU attention takes), one encoder and one decoder
  layer, feed-forward 128, 80 mel bins, 1500 audio positions (Whisper's 30 s
  window: vLLM pads every clip to it) and 448 text positions, float32, random
  weights from a fixed seed;
- the tokenizer: byte-level BPE with no merges (one token per printable ASCII
  character or newline, in GPT-2's byte-to-unicode spelling, as Whisper's own
  vocabulary starts; anything else is <|endoftext|>) and Whisper's
  special tokens: <|endoftext|>, <|startoftranscript|>, a token per language
  vLLM knows, <|translate|>, <|transcribe|>, <|startoflm|>, <|startofprev|>,
  <|nospeech|>, <|notimestamps|>; the decoder prompt vLLM builds
  (<|startoftranscript|><|en|><|transcribe|><|notimestamps|>) is four tokens;
  the special tokens' embeddings are zero, so the random model only ever
  writes characters (a transcript is never empty, nor shorter than asked);
- the feature extractor: WhisperFeatureExtractor's defaults (16 kHz, 80
  mels, hop 160, 30 s chunks).

Usage: make_tiny_whisper.py --out DIR (run with the python of vLLM's venv).
"""

import argparse
import hashlib
import os

import torch
from transformers import (
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForConditionalGeneration,
    WhisperProcessor,
    WhisperTokenizerFast,
)

SEED = 4321
# vLLM's Whisper languages (vllm/model_executor/models/whisper_utils.py),
# in Whisper's own token order for the ones Whisper has
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th "
    "ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr "
    "pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt "
    "haw ln ha ba jw su yue"
).split()
SPECIAL = (
    ["<|endoftext|>", "<|startoftranscript|>"]
    + [f"<|{lang}|>" for lang in LANGUAGES]
    + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
)


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


def write_tokenizer(out):
    """A byte-level BPE with no merges over printable ASCII, as Whisper's tokenizer."""
    spell = bytes_to_unicode()
    chars = list(range(0x20, 0x7F)) + [0x0A]
    vocab = {spell[b]: i for i, b in enumerate(chars)}
    tok = WhisperTokenizerFast(vocab=vocab, merges=[])
    tok.add_special_tokens({"additional_special_tokens": SPECIAL[1:]})
    tok.add_special_tokens({"eos_token": SPECIAL[0], "bos_token": SPECIAL[0], "unk_token": SPECIAL[0]})
    return tok


def write_model(out, tok):
    torch.manual_seed(SEED)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    eot = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=len(tok),
        num_mel_bins=80,
        d_model=64,
        encoder_layers=1,
        encoder_attention_heads=2,
        decoder_layers=1,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    model = WhisperForConditionalGeneration(config).to(torch.float32)
    # special tokens' embeddings (tied to the output projection) are zero, so
    # their logits are 0 and a character's (a random sign) always beats them:
    # every answer is text, max_completion_tokens long
    with torch.no_grad():
        model.model.decoder.embed_tokens.weight[min(ids.values()) :] = 0.0
    model.generation_config.lang_to_id = {f"<|{lang}|>": ids[f"<|{lang}|>"] for lang in LANGUAGES}
    model.generation_config.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    model.generation_config.no_timestamps_token_id = ids["<|notimestamps|>"]
    model.generation_config.is_multilingual = True
    model.save_pretrained(out, safe_serialization=True)


def check(out):
    """Load what was written as vLLM will, and check the prompt and the audio path."""
    import numpy as np
    from transformers import AutoConfig, AutoProcessor

    proc = AutoProcessor.from_pretrained(out)
    config = AutoConfig.from_pretrained(out)
    assert len(proc.tokenizer) == config.vocab_size, (len(proc.tokenizer), config.vocab_size)
    prompt = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
    ids = proc.tokenizer(prompt, add_special_tokens=False).input_ids
    assert len(ids) == 4, ids
    text = "a tone, 440 Hz."
    assert proc.tokenizer.decode(proc.tokenizer(text, add_special_tokens=False).input_ids) == text
    feats = proc.feature_extractor(np.zeros(8000, dtype=np.float32), sampling_rate=16000, return_tensors="np")
    assert feats.input_features.shape == (1, 80, 3000), feats.input_features.shape
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory to write (created)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok = write_tokenizer(a.out)
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(), tokenizer=tok)
    processor.save_pretrained(a.out)
    write_model(a.out, tok)
    ids = check(a.out)
    digest = hashlib.sha256()
    for name in sorted(os.listdir(a.out)):
        with open(os.path.join(a.out, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read())
    print(f"wrote {a.out}: vocab {len(tok)}, seed {SEED}, files sha256 {digest.hexdigest()[:16]}")
    print(f"  decoder prompt ids: {ids}")


if __name__ == "__main__":
    main()
