#!/usr/bin/env bash
# Install a real llama.cpp `llama-server` and a tiny random-weight model for
# cicada's real-server tests, into a cache outside the clone, once per version.
#
# No registry ships a llama-server binary, but the llama-cpp-python source
# package on PyPI carries llama.cpp's full source (tools/server, and vocab-only
# test models under vendor/llama.cpp/models/). This script
#   1. downloads that sdist from PyPI (pinned version, sha256 checked),
#   2. builds only the `llama-server` target on CPU with cmake (cmake from PyPI
#      when the machine has none; web UI, curl and OpenSSL off; Release),
#   3. writes a random-weight LLaMA GGUF (2 layers, n_embd 128) with the
#      llama-bpe vocabulary and a chat template, and the matching Hugging Face
#      tokenizer.json (same vocabulary and merges, BOS added), so cicada can
#      count prompt tokens exactly as the server does,
#   4. writes a random-weight Qwen3 reranker GGUF (rank pooling, a `cls.output`
#      head; same vocabulary) for `llama-server --reranking`.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   llama-server/<version>/src/        unpacked sdist
#   llama-server/<version>/build/      cmake build tree (kept: a rerun resumes)
#   llama-server/<version>/venv/       python tools (cmake, gguf, numpy, tokenizers)
#   llama-server/<version>/bin/llama-server
#   llama-server/<version>/models/tiny-llama.gguf, models/tokenizer.json
#   llama-server/<version>/models/lora-v<N>-{a,b}.gguf  two random-weight LoRA
#                                      adapters of the tiny model
#                                      (make_tiny_gguf_lora.py, seeds 1 and 2),
#                                      for `--lora a.gguf --lora b.gguf`
#   llama-server/<version>/models/tiny-reranker.gguf  a tiny random reranker
#                                      (make_tiny_reranker_gguf.py, rank pooling)
#   llama-server/<version>/READY       written last; when it names the current
#                                      adapters this script only prints the directory
# Progress goes to stderr; the last line of stdout is the version directory.
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/llama-server/$VERSION"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LORA_VERSION=1          # the tiny model's LoRA adapters (make_tiny_gguf_lora.py)
LORA_A="$DIR/models/lora-v$LORA_VERSION-a.gguf"
LORA_B="$DIR/models/lora-v$LORA_VERSION-b.gguf"
# READY naming the current adapters and the reranker (an older cache gets them added)
ready() { [ -f "$DIR/READY" ] && grep -qxF "lora_b=$LORA_B" "$DIR/READY" \
    && grep -qxF "reranker=$DIR/models/tiny-reranker.gguf" "$DIR/READY"; }

say() { printf 'llama-server.sh: %s\n' "$*" >&2; }
need() {
    command -v "$1" >/dev/null 2>&1 || {
        say "missing prerequisite: $1 ($2)"
        exit 1
    }
}

if ready; then
    echo "$DIR"
    exit 0
fi

need python3 "CPython 3 with pip and venv"
need gcc "a C compiler"
need g++ "a C++ compiler"
need make "GNU make"
python3 -m pip --version >/dev/null 2>&1 || { say "missing prerequisite: pip for python3"; exit 1; }
python3 -c 'import venv' 2>/dev/null || { say "missing prerequisite: the python3 venv module"; exit 1; }

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9
if ready; then  # another run finished while we waited
    echo "$DIR"
    exit 0
fi

# 1. python tools, in a venv of our own
# (built in place: a venv's scripts name its path, so it cannot be renamed)
if [ ! -f "$DIR/venv/.complete" ]; then
    say "creating the tool venv"
    rm -rf "$DIR/venv"
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "cmake>=3.28" "gguf==0.19.0" "numpy<3" "tokenizers>=0.21" >&2
    touch "$DIR/venv/.complete"
fi
PY="$DIR/venv/bin/python"
CMAKE="$(command -v cmake || true)"
if [ -z "$CMAKE" ] || ! "$CMAKE" --version | awk 'NR==1 { split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 14)) }'; then
    CMAKE="$DIR/venv/bin/cmake"
fi

# 2. the source
SRC="$DIR/src/llama_cpp_python-$VERSION"
if [ ! -d "$SRC/vendor/llama.cpp/tools/server" ]; then
    say "downloading llama-cpp-python $VERSION (source)"
    rm -rf "$DIR/src" "$DIR/dl"
    mkdir -p "$DIR/src" "$DIR/dl"
    # the sdist file itself, from PyPI's simple index (PEP 691 JSON): pip
    # would first build the package's build dependencies to read its metadata
    "$PY" - "$VERSION" "$DIR/dl/sdist.tar.gz" <<'PYEOF' >&2
import hashlib, json, sys, urllib.request
version, out = sys.argv[1], sys.argv[2]
name = f"llama_cpp_python-{version}.tar.gz"
req = urllib.request.Request(
    "https://pypi.org/simple/llama-cpp-python/",
    headers={"Accept": "application/vnd.pypi.simple.v1+json"},
)
files = json.load(urllib.request.urlopen(req))["files"]
sdist = next((f for f in files if f["filename"] == name), None)
if sdist is None:
    sys.exit(f"PyPI lists no {name}")
data = urllib.request.urlopen(sdist["url"]).read()
digest = hashlib.sha256(data).hexdigest()
if digest != sdist["hashes"]["sha256"]:
    sys.exit(f"{name}: sha256 {digest} is not PyPI's {sdist['hashes']['sha256']}")
open(out, "wb").write(data)
print(f"downloaded {name} ({len(data) // 1_000_000} MB, sha256 ok)")
PYEOF
    tar -xzf "$DIR/dl/sdist.tar.gz" -C "$DIR/src"
    rm -rf "$DIR/dl"
fi
LLAMA="$SRC/vendor/llama.cpp"

# 3. build llama-server (static, CPU only)
if [ ! -x "$DIR/bin/llama-server" ]; then
    say "building llama-server (about 11 minutes on 2 cores; only the first run pays it)"
    "$CMAKE" -S "$LLAMA" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_WEBUI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF >&2
    "$CMAKE" --build "$DIR/build" --target llama-server -j "$(nproc)" >&2
    mkdir -p "$DIR/bin"
    cp "$DIR/build/bin/llama-server" "$DIR/bin/llama-server.tmp"
    mv "$DIR/bin/llama-server.tmp" "$DIR/bin/llama-server"
fi

# 4. the model and its tokenizer
if [ ! -f "$DIR/models/tokenizer.json" ]; then
    say "writing the tiny model"
    mkdir -p "$DIR/models"
    "$PY" "$HERE/make_tiny_gguf.py" \
        --vocab "$LLAMA/models/ggml-vocab-llama-bpe.gguf" \
        --out "$DIR/models/tiny-llama.gguf" \
        --tokenizer-out "$DIR/models/tokenizer.json" >&2
fi

# 5. two LoRA adapters of the tiny model
if [ ! -f "$LORA_B" ]; then
    say "writing two LoRA adapters of the tiny model (version $LORA_VERSION)"
    seed=1
    for out in "$LORA_A" "$LORA_B"; do
        "$PY" "$HERE/make_tiny_gguf_lora.py" --base "$DIR/models/tiny-llama.gguf" \
            --out "$out.tmp" --seed "$seed" >&2
        mv "$out.tmp" "$out"
        seed=$((seed + 1))
    done
fi

# 6. the reranker (same vocabulary, so the same tokenizer.json)
if [ ! -f "$DIR/models/tiny-reranker.gguf" ]; then
    say "writing the tiny reranker"
    "$PY" "$HERE/make_tiny_reranker_gguf.py" \
        --vocab "$LLAMA/models/ggml-vocab-llama-bpe.gguf" \
        --out "$DIR/models/tiny-reranker.gguf.tmp" >&2
    mv "$DIR/models/tiny-reranker.gguf.tmp" "$DIR/models/tiny-reranker.gguf"
fi

printf 'version=%s\nserver=%s\nmodel=%s\ntokenizer=%s\nlora_a=%s\nlora_b=%s\nreranker=%s\n' "$VERSION" \
    "$DIR/bin/llama-server" "$DIR/models/tiny-llama.gguf" "$DIR/models/tokenizer.json" \
    "$LORA_A" "$LORA_B" "$DIR/models/tiny-reranker.gguf" > "$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "ready"
echo "$DIR"
