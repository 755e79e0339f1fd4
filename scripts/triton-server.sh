#!/usr/bin/env bash
# Install a real NVIDIA Triton Inference Server (CPU: its HTTP frontend with
# the generate extension, and the Python backend) and a tiny word-level
# tokenizer for cicada's real-server tests, into a cache outside the clone,
# once per version.
#
#   dir=$(scripts/triton-server.sh | tail -1)
#   . "$dir/env.sh"
#   "$TRITON_SERVER" --model-repository REPO --backend-directory "$TRITON_BACKENDS" \
#       --http-address 127.0.0.1 --http-port PORT --allow-grpc false ...
#
# No registry ships Triton's own packages outside NVIDIA's containers, but
# PyPI's `nvidia-pytriton` wheel carries a whole `tritonserver` binary
# (2.51.0 in 0.7.0) with its libraries, the Python backend and a backend stub
# for each Python from 3.8 to 3.13. This script installs that wheel (without
# PyTriton's own Python dependencies: only the server is used) into a venv
# with numpy (the Python backend's utilities import it) and `tokenizers` (the
# test model counts tokens with it), and puts the stub for the venv's Python
# beside the Python backend, as PyTriton does when it starts the server. The
# stub embeds the machine's shared libpython of that version, which finds the
# venv's packages when the venv's `bin` leads PATH (env.sh sets it).
# The model itself is the tests' own (tests/support/triton/): a deterministic
# Python model with the interface of Triton's vLLM backend.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   triton/<version>/venv/        the venv; its site-packages/pytriton/tritonserver
#                                 holds bin/tritonserver and backends/python (~300 MB)
#   triton/<version>/tokenizer-v<N>.json  a word-level tokenizer: [UNK] and w0..w999
#   triton/<version>/env.sh       the environment to serve with (source it)
#   triton/<version>/READY        written last; when it names the current
#                                 tokenizer this script only prints the directory
# Progress goes to stderr; the last line of stdout is the version directory.
set -euo pipefail

VERSION=0.7.0           # nvidia-pytriton (tritonserver 2.51.0)
NUMPY=1.26.4            # nvidia-pytriton 0.7.0 declares numpy<2
TOKENIZERS=0.23.3
TOKENIZER_VERSION=1     # raised whenever the tokenizer written below changes
NEED_MB=600             # free space the install wants

ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/triton/$VERSION"
TOKENIZER="$DIR/tokenizer-v$TOKENIZER_VERSION.json"

say() { printf 'triton-server.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
ready() { [ -f "$DIR/READY" ] && grep -qxF "tokenizer=$TOKENIZER" "$DIR/READY"; }

if ready; then
    echo "$DIR"
    exit 0
fi

# --- prerequisites: each one named when missing -----------------------------
command -v flock >/dev/null 2>&1 || die "missing prerequisite: flock (Debian: apt-get install util-linux)"
command -v python3 >/dev/null 2>&1 || die "missing prerequisite: python3 (3.9 to 3.12)"
PYVER=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# the wheel has Python backend stubs for 3.8 to 3.13; numpy 1.26 (the
# wheel's numpy<2) has wheels for 3.9 to 3.12
python3 -c 'import sys; sys.exit(not ((3, 9) <= sys.version_info[:2] < (3, 13)))' \
    || die "missing prerequisite: python3 3.9 to 3.12 (found $PYVER)"
python3 -m pip --version >/dev/null 2>&1 \
    || die "missing prerequisite: pip for python3 (Debian: apt-get install python3-pip)"
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
    || die "missing prerequisite: the python3 venv module with ensurepip (Debian: apt-get install python3-venv)"
command -v ldd >/dev/null 2>&1 || die "missing prerequisite: ldd (Debian: apt-get install libc-bin)"

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

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PIP=(--quiet --no-cache-dir)
PY="$DIR/venv/bin/python"

# --- the venv ----------------------------------------------------------------
# Built in place and marked complete at the end (a venv's scripts name its
# path); an unmarked one is a partial install and is built again.
if [ ! -f "$DIR/venv/.complete" ]; then
    avail_kb=$(df -Pk "$DIR" | awk 'NR == 2 { print $4 }')
    [ "$avail_kb" -ge $((NEED_MB * 1024)) ] \
        || die "not enough disk: $((avail_kb / 1024)) MB free under $DIR, the install needs about $NEED_MB MB"
    rm -rf "$DIR/venv"
    say "creating $DIR/venv: nvidia-pytriton $VERSION from PyPI (a 55 MB wheel, about 300 MB installed, under a minute)"
    start=$SECONDS
    python3 -m venv "$DIR/venv"
    "$PY" -m pip install "${PIP[@]}" "numpy==$NUMPY" "tokenizers==$TOKENIZERS" >&2
    # its Python API's requirements are not needed: only the server is run
    "$PY" -m pip install "${PIP[@]}" --no-deps "nvidia-pytriton==$VERSION" >&2
    SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    TS="$SITE/pytriton/tritonserver"
    STUB="$TS/python_backend_stubs/$PYVER/triton_python_backend_stub"
    [ -x "$TS/bin/tritonserver" ] || die "the wheel has no tritonserver binary at $TS/bin"
    [ -f "$STUB" ] || die "the wheel has no Python backend stub for Python $PYVER"
    # the stub's libraries: the wheel's own (found relative to backends/python,
    # as from its own folder) and the machine's libpython$PYVER
    cp "$STUB" "$TS/backends/python/triton_python_backend_stub"
    missing=$(ldd "$TS/backends/python/triton_python_backend_stub" | awk '/not found/ { print $1 }')
    [ -z "$missing" ] || die "missing prerequisite: $missing for the Python backend stub (Debian: apt-get install libpython$PYVER)"
    missing=$(ldd "$TS/bin/tritonserver" | awk '/not found/ { print $1 }')
    [ -z "$missing" ] || die "tritonserver cannot load $missing"
    # it prints its usage (and exits 1) when asked for it: proof that it runs
    usage=$("$TS/bin/tritonserver" --help 2>&1 || true)
    case "$usage" in
        *--metrics-address*) ;;
        *) die "$TS/bin/tritonserver does not run: $usage" ;;
    esac
    touch "$DIR/venv/.complete"
    say "venv done in $((SECONDS - start)) s"
fi
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TS="$SITE/pytriton/tritonserver"

# --- the tokenizer: written aside, then renamed into place -------------------
if [ ! -f "$TOKENIZER" ]; then
    say "writing the word-level tokenizer (version $TOKENIZER_VERSION)"
    "$PY" - "$TOKENIZER.tmp" <<'PYEOF' >&2
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders

# one token per word w0..w999 (whitespace between words), [UNK] special
vocab = {"[UNK]": 0}
vocab.update({f"w{i}": i + 1 for i in range(1000)})
tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
tok.add_special_tokens(["[UNK]"])
tok.save(sys.argv[1])
text = "w3 w999 w0"
assert tok.encode(text).ids == [4, 1000, 1], tok.encode(text).ids
assert tok.decode(tok.encode(text).ids) == text
print(f"triton-server.sh: tokenizer of {tok.get_vocab_size()} tokens")
PYEOF
    mv "$TOKENIZER.tmp" "$TOKENIZER"
fi

# --- env.sh, then READY ------------------------------------------------------
cat > "$DIR/env.sh.tmp" <<EOF
# Source this to run Triton with the Python backend of cicada's cache
# (written by cicada's scripts/triton-server.sh); the venv's bin leads PATH
# so the Python backend's stub finds numpy and tokenizers.
export PATH="$DIR/venv/bin:\$PATH"
export TRITON_SERVER="$TS/bin/tritonserver"
export TRITON_BACKENDS="$TS/backends"
export TRITON_TINY_TOKENIZER="$TOKENIZER"
EOF
mv "$DIR/env.sh.tmp" "$DIR/env.sh"
printf 'nvidia-pytriton=%s\nserver=%s\ntokenizer=%s\n' "$VERSION" "$TS/bin/tritonserver" "$TOKENIZER" > "$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "ready: $DIR"
echo "$DIR"
