#!/usr/bin/env bash
# Install the gateways cicada's tests put between the client and a server:
# nginx (TLS + HTTP/2 and h2c reverse proxy) and tinyproxy (forward proxy:
# absolute-form, CONNECT, BasicAuth), from the distribution's own packages,
# into a cache outside the clone, once per package version.
#
# The packages are fetched with `apt-get download` and unpacked with
# `dpkg -x`: no dpkg database change, no service started, nothing written
# under /etc. The tests run both binaries with configurations of their own
# (tests/support/gateways.rs). Debian bookworm's `nginx-light` is only a
# metapackage over `nginx` (1.22.1, built with the SSL and HTTP/2 modules);
# `tinyproxy-bin` holds the tinyproxy binary alone. Their libraries (libssl3,
# libpcre2-8-0, zlib1g, libcrypt1; libc) are part of a Debian base system;
# the script checks with ldd that none is missing.
#
# Cache layout ($CICADA_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/cicada):
#   gateways/nginx-<v>_tinyproxy-<v>/usr/sbin/nginx
#   gateways/nginx-<v>_tinyproxy-<v>/usr/bin/tinyproxy
#   gateways/nginx-<v>_tinyproxy-<v>/READY     written last
# The versions are the archive's current candidates (security updates replace
# them), so the directory name records what was unpacked.
# Progress goes to stderr; the last line of stdout is the version directory.
set -euo pipefail

ROOT="${CICADA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cicada}"
CACHE="$ROOT/gateways"

say() { printf 'gateways.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# --- prerequisites: each one named when missing -----------------------------
for tool in apt-get apt-cache dpkg; do
    command -v "$tool" >/dev/null 2>&1 \
        || die "missing prerequisite: $tool (a Debian or Ubuntu system with apt)"
done
command -v flock >/dev/null 2>&1 || die "missing prerequisite: flock (Debian: apt-get install util-linux)"
command -v ldd >/dev/null 2>&1 || die "missing prerequisite: ldd (Debian: apt-get install libc-bin)"

# The archive's candidate versions of nginx and tinyproxy-bin, "NGINX PROXY"
# (a field is "-" when apt knows none); one apt-cache call, which is most of
# this script's time when the gateways are already installed.
candidates() {
    apt-cache policy nginx tinyproxy-bin 2>/dev/null | awk '
        /^[^ ]/ { pkg = $1 }
        /Candidate:/ && $2 != "(none)" { v[pkg] = $2 }
        END { printf "%s %s\n", v["nginx:"] ? v["nginx:"] : "-", v["tinyproxy-bin:"] ? v["tinyproxy-bin:"] : "-" }'
}

read -r nginx_v proxy_v < <(candidates)
if [ "$nginx_v" = - ] || [ "$proxy_v" = - ]; then
    [ "$(id -u)" -eq 0 ] \
        || die "missing prerequisite: apt's package lists know no nginx or tinyproxy-bin; run 'apt-get update' as root"
    say "apt's package lists know no nginx or tinyproxy-bin: running apt-get update"
    apt-get update -qq >&2
    read -r nginx_v proxy_v < <(candidates)
fi
[ "$nginx_v" != - ] || die "missing prerequisite: the package nginx in apt's sources (Debian bookworm has 1.22.1)"
[ "$proxy_v" != - ] || die "missing prerequisite: the package tinyproxy-bin in apt's sources (Debian bookworm has 1.11.1)"

KEY="nginx-${nginx_v//:/_}_tinyproxy-${proxy_v//:/_}"
DIR="$CACHE/$KEY"

if [ -f "$DIR/READY" ]; then
    echo "$DIR"
    exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-$KEY"
if ! flock -n 9; then
    say "another install holds $CACHE/.lock-$KEY; waiting for it"
    flock 9
fi
if [ -f "$DIR/READY" ]; then  # another run finished while we waited
    echo "$DIR"
    exit 0
fi

# --- download and unpack -----------------------------------------------------
say "downloading nginx $nginx_v and tinyproxy-bin $proxy_v (apt-get download; nothing is installed)"
# (in the temp directory: apt's unprivileged downloader may not reach the cache)
DL="$(mktemp -d)"
PARTIAL="$DIR.partial"
trap 'rm -rf "$DL" "$PARTIAL"' EXIT
# apt downloads as the unprivileged _apt user when run as root: let it write here
chmod 755 "$DL"
chown _apt "$DL" 2>/dev/null || true
(cd "$DL" && apt-get download -qq "nginx=$nginx_v" "tinyproxy-bin=$proxy_v" >&2) \
    || die "apt-get download nginx=$nginx_v tinyproxy-bin=$proxy_v failed (is the archive reachable?)"

rm -rf "$PARTIAL"
mkdir -p "$PARTIAL"
for deb in "$DL"/*.deb; do
    dpkg -x "$deb" "$PARTIAL"
done

NGINX="$PARTIAL/usr/sbin/nginx"
TINYPROXY="$PARTIAL/usr/bin/tinyproxy"
[ -x "$NGINX" ] || die "the nginx package holds no usr/sbin/nginx"
[ -x "$TINYPROXY" ] || die "the tinyproxy-bin package holds no usr/bin/tinyproxy"
for bin in "$NGINX" "$TINYPROXY"; do
    missing="$(ldd "$bin" | awk '/not found/ { print $1 }' | tr '\n' ' ')"
    [ -z "$missing" ] || die "missing prerequisite: libraries for $(basename "$bin"): $missing"
done
"$NGINX" -V 2>&1 | grep -q -- '--with-http_v2_module' \
    || die "this nginx is built without HTTP/2 (--with-http_v2_module); the tests need it"
"$NGINX" -V 2>&1 | grep -q -- '--with-http_ssl_module' \
    || die "this nginx is built without TLS (--with-http_ssl_module); the tests need it"
"$TINYPROXY" -v >/dev/null 2>&1 || die "$TINYPROXY -v failed"

rm -rf "$DIR"
mv "$PARTIAL" "$DIR"
printf 'nginx_version=%s\ntinyproxy_version=%s\nnginx=%s\ntinyproxy=%s\n' \
    "$nginx_v" "$proxy_v" "$DIR/usr/sbin/nginx" "$DIR/usr/bin/tinyproxy" > "$DIR/READY"
say "ready"
echo "$DIR"
