#!/usr/bin/env python3
"""Write a tiny random-weight LlamaForCausalLM and its tokenizer, for vLLM tests.

The model: hidden 64, 2 heads (head dim 32: vLLM's CPU attention needs head
sizes of 32, 64 or 80 and up), 2 layers, intermediate 128, 2048 positions,
float32, random weights from a fixed seed.

The tokenizer: a WordLevel vocabulary (common English words, digits,
punctuation, then made-up syllable words up to VOCAB_SIZE), a lower-casing
normalizer, a Whitespace pre-tokenizer (\\w+ or one run of punctuation is one
token), `<s>` put in front of every encoded text, and a chat template. Every
vocabulary entry is one token, so a prompt of n random token ids decodes to
n words and encodes back to the same n ids (plus `<s>`), which is what
clients that build prompts from token ids (vllm bench's random data set)
rely on. Written as tokenizer.json, tokenizer_config.json (with
`tokenizer_class: PreTrainedTokenizerFast` and `chat_template`) and
special_tokens_map.json, by hand, so the files do not depend on how a
transformers release likes to save a tokenizer.

Nothing is downloaded; the same seed and versions write the same files.
"""

import argparse
import hashlib
import itertools
import json
import os

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 1234
VOCAB_SIZE = 4096
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
PUNCT = list(".,!?;:'\"()-/&%$#@*+=<>[]{}_~`|\\^")
# Common English words, so English prompts mostly map to real tokens and the
# model's random output reads like (meaningless) English.
ENGLISH = """
the of and to a in is it you that he was for on are with as i his they be at one
have this from or had by not word but what some we can out other were all there
when up use your how said an each she which do their time if will way about many
then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our
under name very through just form sentence great think say help low line differ
turn cause much mean before move right boy old too same tell does set three want
air well also play small end put home read hand port large spell add even land
here must big high such follow act why ask men change went light kind off need
house picture try us again animal point mother world near build self earth father
head stand own page should country found answer school grow study still learn
plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run while press
close night real life few north open seem together next white children begin got
walk example ease paper group always music those both mark often letter until mile
river car feet care second book carry took science eat room friend began idea fish
mountain stop once base hear horse cut sure watch color face wood main enough
plain girl usual young ready above ever red list though feel talk bird soon body
dog family direct pose leave song measure door product black short numeral class
wind question happen complete ship area half rock order fire south problem piece
told knew pass since top whole king space heard best hour better true during
hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay
against pattern slow center love person money serve appear road map rain rule
govern pull cold notice voice unit power town fine certain fly fall lead cry dark
machine note wait plan figure star box noun field rest correct able pound done
beauty drive stood contain front teach week final gave green oh quick develop
ocean warm free minute strong special mind behind clear tail produce fact street
inch multiply nothing course stay wheel full force blue object decide surface deep
moon island foot system busy test record boat common gold possible plane stead dry
wonder laugh thousand ago ran check game shape equate hot miss brought heat snow
tire bring yes distant fill east paint language among grand ball yet wave drop
heart am present heavy dance engine position arm wide sail material size vary
settle speak weight general ice matter circle pair include divide syllable felt
perhaps pick sudden count square reason length represent art subject region energy
hunt probable bed brother egg ride cell believe fraction forest sit race window
store summer train sleep prove lone exercise wall catch mount wish sky board joy
winter sat written wild instrument kept glass grass cow job edge sign visit past
soft fun bright gas weather month million bear finish happy hope flower clothe
strange gone jump baby eight village meet root buy raise solve metal whether push
seven paragraph third shall held hair describe cook floor either result burn hill
safe cat century consider type law bit coast copy phrase silent tall sand soil
roll temperature finger industry value fight lie beat excite natural view sense ear
else quite broke case middle kill son lake moment scale loud spring observe child
straight consonant nation dictionary milk speed method organ pay age section dress
cloud surprise quiet stone tiny climb cool design poor lot experiment bottom key
iron single stick flat twenty skin smile crease hole trade melody trip office
receive row mouth exact symbol die least trouble shout except wrote seed tone join
suggest clean break lady yard rise bad blow oil blood touch grew cent mix team wire
cost lost brown wear garden equal sent choose fell fit flow fair bank collect save
control decimal gentle woman captain practice separate difficult doctor please
protect noon whose locate ring character insect caught period indicate radio spoke
atom human history effect electric expect crop modern element hit student corner
party supply bone rail imagine provide agree thus capital chair danger fruit rich
thick soldier process operate guess necessary sharp wing create neighbor wash bat
rather crowd corn compare poem string bell depend meat rub tube famous dollar
stream fear sight thin triangle planet hurry chief colony clock mine tie enter
major fresh search send yellow gun allow print dead spot desert suit current lift
rose continue block chart hat sell success company subtract event particular deal
swim term opposite wife shoe shoulder spread arrange camp invent cotton born
determine quart nine truck noise level chance gather shop stretch throw shine
property column molecule select wrong gray repeat require broad prepare salt nose
plural anger claim continent oxygen sugar death pretty skill women season solution
magnet silver thank branch match suffix especially fig afraid huge sister steel
discuss forward similar guide experience score apple bought led pitch coat mass
card band rope slip win dream evening condition feed tool total basic smell valley
nor double seat arrive master track parent shore division sheet substance favor
connect post spend chord fat glad original share station dad bread charge proper
bar offer segment slave duck instant market degree populate chick dear enemy reply
drink occur support speech nature range steam motion path liquid log meant
quotient teeth shell neck
"""


def syllable_words():
    """Made-up words of consonant-vowel syllables: ba, be, ..., baba, babe, ..."""
    syllables = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"]
    for n in itertools.count(1):
        for parts in itertools.product(syllables, repeat=n):
            yield "".join(parts)


def build_vocab():
    vocab = {}
    for t in SPECIAL + [str(d) for d in range(100)] + PUNCT + ENGLISH.split():
        vocab.setdefault(t, len(vocab))
    words = syllable_words()
    while len(vocab) < VOCAB_SIZE:
        vocab.setdefault(next(words), len(vocab))
    return vocab


def write_tokenizer(out, vocab):
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
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

    assert AutoConfig.from_pretrained(out).vocab_size == len(vocab) == VOCAB_SIZE
    hf = AutoTokenizer.from_pretrained(out)
    assert len(hf) == VOCAB_SIZE, len(hf)
    ids = hf("The cat sat on the hill, babe.").input_ids
    assert ids[0] == vocab["<s>"] and len(ids) == 10 and vocab["<unk>"] not in ids[1:], ids
    assert hf.decode(ids, skip_special_tokens=True) == "the cat sat on the hill , babe ."
    sample = list(range(len(SPECIAL), VOCAB_SIZE, 37))
    text = hf.decode(sample)
    assert hf(text, add_special_tokens=False).input_ids == sample, "ids do not round-trip"
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
    print(f"  'The cat sat on the hill, babe.' -> {ids}")
    print(f"  chat prompt: {prompt!r}")


if __name__ == "__main__":
    main()
