#!/usr/bin/env bash
# Install SGLang's router (the SGLang Model Gateway, `smg`, PyPI's
# `sglang-router`: a Rust server in a Python wheel) for cicada's real-server
# tests, into a cache outside the clone, once per version.
#
#   dir=$(scripts/sglang-router.sh | tail -1)
#   "$dir/venv/bin/smg" launch --host 127.0.0.1 --port PORT \
#       --worker-urls http://127.0.0.1:WORKER --prometheus-port METRICS
#
# SGLang's engine itself does not run here: its CPU engine needs the CPU
# build of sgl-kernel, which no registry ships (PyPI's sglang-kernel and
# sgl-kernel wheels are CUDA builds, with no source distribution), and its
# GPU path needs CUDA. Its router does: the tests put it in front of a
# llama-server, so cicada's `sglang` and `sglang-chat` requests pass through
# SGLang's own request handling on their way to a real server.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   sglang-router/<version>/venv/     the venv (venv/bin/smg); ~150 MB
#   sglang-router/<version>/READY     written last
# Progress goes to stderr; the last line of stdout is the version directory.
set -euo pipefail

VERSION=0.3.2           # sglang-router
NEED_MB=300             # free space the install wants

ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/sglang-router/$VERSION"

say() { printf 'sglang-router.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -f "$DIR/READY" ]; then
    echo "$DIR"
    exit 0
fi

# --- prerequisites: each one named when missing -----------------------------
command -v flock >/dev/null 2>&1 || die "missing prerequisite: flock (Debian: apt-get install util-linux)"
command -v python3 >/dev/null 2>&1 || die "missing prerequisite: python3 (3.8 or newer)"
python3 -m pip --version >/dev/null 2>&1 \
    || die "missing prerequisite: pip for python3 (Debian: apt-get install python3-pip)"
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
    || die "missing prerequisite: the python3 venv module with ensurepip (Debian: apt-get install python3-venv)"

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
if ! flock -n 9; then
    say "another install holds $DIR/.lock; waiting for it"
    flock 9
fi
if [ -f "$DIR/READY" ]; then
    echo "$DIR"
    exit 0
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PIP=(--quiet --no-cache-dir)

# Built in place and marked complete at the end (a venv's scripts name its
# path); an unmarked one is a partial install and is built again.
if [ ! -f "$DIR/venv/.complete" ]; then
    avail_kb=$(df -Pk "$DIR" | awk 'NR == 2 { print $4 }')
    [ "$avail_kb" -ge $((NEED_MB * 1024)) ] \
        || die "not enough disk: $((avail_kb / 1024)) MB free under $DIR, the install needs about $NEED_MB MB"
    rm -rf "$DIR/venv"
    say "creating $DIR/venv: sglang-router $VERSION from PyPI (about 150 MB, a minute)"
    start=$SECONDS
    python3 -m venv "$DIR/venv"
    CONSTRAINTS="$DIR/constraints.txt"
    # pip freeze of a venv that served, less sglang-router itself
    cat > "$CONSTRAINTS" <<'EOF'
aiohappyeyeballs==2.7.1
aiohttp==3.14.5
aiosignal==1.4.0
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
attrs==26.1.0
click==8.5.1
fastapi==0.165.0
frozenlist==1.8.0
h11==0.16.0
idna==3.20
multidict==7.2.1
opentelemetry-api==1.45.2
orjson==3.13.0
propcache==0.5.4
pydantic==2.14.4
pydantic_core==2.50.5
setproctitle==1.3.8
starlette==1.10.0
typing-inspection==0.4.5
typing_extensions==4.16.0
uvicorn==0.54.0
yarl==1.25.1
EOF
    "$DIR/venv/bin/python" -m pip install "${PIP[@]}" -c "$CONSTRAINTS" "sglang-router==$VERSION" >&2
    "$DIR/venv/bin/smg" launch --help >/dev/null 2>&1 || die "$DIR/venv/bin/smg does not run"
    touch "$DIR/venv/.complete"
    say "venv done in $((SECONDS - start)) s"
fi

printf 'sglang-router=%s\nsmg=%s\n' "$VERSION" "$DIR/venv/bin/smg" > "$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "ready: $DIR"
echo "$DIR"
