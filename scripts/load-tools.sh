#!/usr/bin/env bash
# Install the general HTTP load generators `cicada selftest --http-rate`
# measures cicada against, into a cache outside the clone, once per version:
#   - wrk: Debian's package (apt-get, as root), linked into the cache;
#   - oha: the Rust, hyper-based load generator, from crates.io
#     (`cargo install --locked`, built here).
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   load-tools/wrk-<version>-oha-<version>/bin/wrk   (a link to Debian's)
#   load-tools/wrk-<version>-oha-<version>/bin/oha
#   load-tools/wrk-<version>-oha-<version>/READY     written last
# Progress goes to stderr; the last line of stdout is the version directory
# (pass it to `cicada selftest --http-rate --load-tools DIR`; the selftest
# looks there by default).
set -euo pipefail

WRK_VERSION="${CICADA_WRK_VERSION:-4.1.0-3+b2}"
OHA_VERSION="${CICADA_OHA_VERSION:-1.16.0}"
ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/load-tools/wrk-${WRK_VERSION}-oha-${OHA_VERSION}"

say() { printf 'load-tools.sh: %s\n' "$*" >&2; }

if [ -f "$DIR/READY" ]; then
    echo "$DIR"
    exit 0
fi
command -v cargo >/dev/null 2>&1 || { say "missing prerequisite: cargo (to build oha)"; exit 1; }

mkdir -p "$DIR/bin"
exec 9>"$DIR/.lock"
flock 9
if [ -f "$DIR/READY" ]; then  # another run finished while we waited
    echo "$DIR"
    exit 0
fi

# 1. wrk, Debian's build at the pinned version
installed="$(dpkg-query -W -f='${Version}' wrk 2>/dev/null || true)"
if [ "$installed" != "$WRK_VERSION" ]; then
    if [ "$(id -u)" != 0 ]; then
        say "wrk $WRK_VERSION is not installed and installing it needs root: apt-get install wrk=$WRK_VERSION"
        exit 1
    fi
    say "installing wrk $WRK_VERSION (apt-get)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "wrk=$WRK_VERSION" >&2
fi
ln -sf "$(command -v wrk)" "$DIR/bin/wrk"

# 2. oha from crates.io, its lock file honoured
if [ ! -x "$DIR/bin/oha" ]; then
    say "building oha $OHA_VERSION (cargo install --locked; a few minutes)"
    cargo install oha --version "$OHA_VERSION" --locked --root "$DIR" >&2
fi

"$DIR/bin/wrk" --version >&2 2>&1 || true
"$DIR/bin/oha" --version >&2
touch "$DIR/READY"
echo "$DIR"
