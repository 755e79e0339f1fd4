#!/usr/bin/env bash
# The Debian packages cicada's build and test suite need beyond Rust and
# python3, installed when missing, and the one permission the suite needs:
#
#   gcc g++ make       linking (cargo's build scripts), llama.cpp's build
#                      (scripts/llama-server.sh), torch.compile in vLLM
#   python3-pip        the server installs and scripts/kubectl.sh
#   python3-venv       the servers' own virtual environments
#   python3-dev        Python.h, which vLLM's torch.compile needs to serve, and
#                      (through libpython3-dev) the shared libpython that
#                      Triton's Python backend loads (scripts/triton-server.sh)
#   iproute2           `ip`: the network-namespace tests (tests/support/netns.rs)
#   curl               deploy/slurm/cicada.sbatch's health checks (tests/tests/slurm.rs)
#   chromium           the page tests' headless browser (tests/support/browser.rs)
#   util-linux         flock (the install scripts) and taskset (CPU-starved tests)
#
# These are system packages, installed with apt-get as root (CI runs as
# root); a user who is not root is told the one command to run. The network-
# namespace tests also need root or CAP_NET_ADMIN and CAP_SYS_ADMIN: the
# script checks that by adding and deleting a namespace.
#
# Nothing is fetched when every package is already installed (one dpkg-query).
# Progress goes to stderr.
set -euo pipefail

PACKAGES=(gcc g++ make python3-pip python3-venv python3-dev iproute2 curl chromium util-linux)

say() { printf 'system-packages.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    || die "missing prerequisite: a Debian or Ubuntu system with apt (the packages are: ${PACKAGES[*]})"

missing=()
for p in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ] \
        || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] \
        || die "missing packages: ${missing[*]}; install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    say "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    # a fresh machine may have no package lists yet
    if ! apt-get install -y -qq "${missing[@]}" >&2; then
        say "apt-get install failed: updating the package lists and trying again"
        apt-get update -qq >&2
        apt-get install -y -qq "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
    fi
fi

# the network-namespace tests add namespaces, veth pairs and a bridge
probe="cicada-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then
    die "cannot add a network namespace (ip netns add): the network-namespace tests need root, or CAP_NET_ADMIN and CAP_SYS_ADMIN"
fi
ip netns del "$probe"
say "ready"
