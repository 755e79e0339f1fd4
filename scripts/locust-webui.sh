#!/usr/bin/env bash
# Fetch Locust's own built web UI, which cicada serves with `--web-ui DIR`
# and the tests load in headless Chromium against a cicada run, into a cache
# outside the clone, once per pinned version. Nothing of Locust's goes into
# the repository.
#
# The PyPI `locust` wheel ships the UI built (locust/webui/dist: index.html,
# a Flask/Jinja template, and assets/). The wheel is fetched with
# `pip download locust==<version> --no-deps` against a pinned sha256 and only
# the dist directory (and Locust's licence) is unpacked.
#
# Two versions, because Locust changed its control routes between them:
#   2.46.7: the page sends GET /stop and GET /stats/reset (as every Locust
#           up to 2.46 did, and its users' scripts still do);
#   2.47.0: the page sends them as POST.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   locust-webui/locust-<version>/dist/index.html
#   locust-webui/locust-<version>/dist/assets/...
#   locust-webui/locust-<version>/LICENSE         (Locust's, MIT)
#   locust-webui/locust-<version>/READY           written last
# Progress goes to stderr; the last line of stdout is the locust-webui
# directory (pass `<it>/locust-<version>/dist` to `--web-ui`).
set -euo pipefail

# version and the sha256 of its wheel (locust-<version>-py3-none-any.whl)
VERSIONS=(
    "2.46.7 a737bcf8d6728d4f0efe9e460ef9c69d0084e1dd085734db6e4775ece453b7fe"
    "2.47.0 a773af200bb93b1bed0b99c48c18f11343ed159803a8af3ee3ad0696b05b7d09"
)
ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
CACHE="$ROOT/locust-webui"

say() { printf 'locust-webui.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

for entry in "${VERSIONS[@]}"; do
    read -r version sha <<<"$entry"
    dir="$CACHE/locust-$version"
    [ -f "$dir/READY" ] && continue
    command -v python3 >/dev/null 2>&1 || die "missing prerequisite: python3"
    python3 -m pip --version >/dev/null 2>&1 \
        || die "missing prerequisite: pip for python3 (Debian: apt-get install python3-pip)"
    rm -rf "$dir"
    mkdir -p "$dir"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    say "fetching locust $version's wheel from PyPI (pip download, ~1.5 MB)"
    printf 'locust==%s --hash=sha256:%s\n' "$version" "$sha" >"$tmp/req.txt"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
        --disable-pip-version-check -r "$tmp/req.txt" -d "$tmp" >&2
    wheel="$tmp/locust-$version-py3-none-any.whl"
    [ -f "$wheel" ] || die "pip left no $wheel"
    python3 - "$wheel" "$dir" "$version" <<'PY'
import pathlib, sys, zipfile

wheel, out, version = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
prefix = "locust/webui/dist/"
licence = f"locust-{version}.dist-info/licenses/LICENSE"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not any(n == prefix + "index.html" for n in names):
        sys.exit(f"{wheel}: no {prefix}index.html")
    for n in names:
        rel = pathlib.PurePosixPath(n[len(prefix):])
        if rel.is_absolute() or ".." in rel.parts:
            sys.exit(f"{wheel}: unsafe path {n}")
        target = out / "dist" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(n))
    if licence in z.namelist():
        (out / "LICENSE").write_bytes(z.read(licence))
PY
    grep -q '{{ template_args|tojson }}' "$dir/dist/index.html" \
        || die "locust $version's index.html has no template_args slot"
    rm -rf "$tmp"
    trap - EXIT
    touch "$dir/READY"
    say "locust $version's web UI is at $dir/dist"
done
echo "$CACHE"
