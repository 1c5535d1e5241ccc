#!/usr/bin/env bash
# deps.sh [--tests|--fuzz|--lint] — installs the Debian packages ampx builds with (and, with --tests, the
# ones its test suite needs) when any is missing. Quick and silent when all are there.
set -euo pipefail
pkgs=(cmake gcc make pkg-config libcjson-dev)
# The OpenCL backend builds against the ICD loader and CLBlast (never a vendor library) and
# runs on PoCL, an OpenCL implementation on the CPU, wherever no GPU driver is installed.
pkgs+=(ocl-icd-opencl-dev opencl-headers libclblast-dev pocl-opencl-icd)
# ampx plot draws with cairo (built without it when it is missing).
pkgs+=(libcairo2-dev)
# Data-parallel training: Open MPI launches the ranks and all-reduces host buffers
# (mpirun -np N ampx train); without it ampx builds and trains single-process.
pkgs+=(openmpi-bin libopenmpi-dev)
# poppler-utils: pdftotext reads back the labels ampx plot drew (tests/train/observe_cli.sh).
if [ "${1:-}" = "--tests" ]; then pkgs+=(libcriterion-dev python3 clinfo poppler-utils); fi
# The fuzz harnesses (tools/fuzz.sh) need clang and its libFuzzer runtime.
if [ "${1:-}" = "--fuzz" ]; then pkgs+=(clang); fi
# tools/lint.sh: the formatting check and the static analyser.
if [ "${1:-}" = "--lint" ]; then pkgs+=(clang-format cppcheck); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
