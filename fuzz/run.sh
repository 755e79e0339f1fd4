#!/usr/bin/env bash
# Fuzz one target with its seeds and dictionary, then keep a minimised corpus.
#   fuzz/run.sh TARGET [SECONDS]      (default 180 s; needs cargo-fuzz)
# New findings go to fuzz/corpus/TARGET (a minimal edge-covering set);
# crashes go to fuzz/artifacts/TARGET. The workspace tests replay corpus/ and seeds/.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
secs=${2:-180}
# AddressSanitizer needs nightly; without nightly, fuzz on stable with no sanitizer
# (the code is safe Rust, so the checks and panics are what find bugs).
if [ -z "${CICADA_FUZZ_TOOLCHAIN:-}" ] && rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=+nightly sanitizer=address
else
  toolchain=${CICADA_FUZZ_TOOLCHAIN:-+stable} sanitizer=none
fi
case $target in
  sse_framer) dict=dict/sse.dict; extra=() ;;
  openai_events) dict=dict/json.dict; extra=() ;;
  scenario) dict=dict/toml.dict; extra=(../crates/scenarios/tests/malformed ../examples) ;;
  dataset) dict=dict/toml.dict; extra=() ;;
  dataset_*) dict=dict/json.dict; extra=() ;;  # file-backed datasets are mostly JSON
  *) dict=""; extra=() ;;
esac
mkdir -p "corpus/$target" "seeds/$target"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(-max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048)
[ -n "$dict" ] && args+=(-dict="$dict")
cargo $toolchain fuzz run -O --sanitizer "$sanitizer" "$target" "$work" "corpus/$target" "seeds/$target" "${extra[@]}" -- "${args[@]}"
# Keep a small corpus: the fewest inputs (of at most 2 KiB) that cover an edge
# the seeds do not; crash-* files are regressions and always stay.
pool=$(mktemp -d)
base=$(mktemp -d)
trap 'rm -rf "$work" "$pool" "$base"' EXIT
find "$work" "corpus/$target" -maxdepth 1 -type f ! -name 'crash-*' -size -2049c -exec cp {} "$pool"/ \;
find "corpus/$target" -maxdepth 1 -type f ! -name 'crash-*' -delete
i=0
for f in "seeds/$target"/* "corpus/$target"/crash-* $(for d in "${extra[@]}"; do echo "$d"/*; done); do
  if [ -f "$f" ]; then cp "$f" "$base/seed-$i"; i=$((i + 1)); fi
done
cargo $toolchain fuzz run -O --sanitizer "$sanitizer" "$target" "$base" "$pool" -- \
  -set_cover_merge=1 -use_counters=0 -max_len=4096 -timeout=10
find "$base" -maxdepth 1 -type f ! -name 'seed-*' -exec mv {} "corpus/$target"/ \;
