#!/usr/bin/env bash
# conformance_cap.sh CAP AMPX TEST_CONFORMANCE — runs the conformance suite on the CPU
# backend with AMPX_CPU_ISA=CAP when the backend then reports isa=CAP; otherwise says which
# path it fell back to and why, and exits 77 (ctest: skipped).
set -u
cap=$1 ampx=$2 suite=$3
desc=$(AMPX_CPU_ISA=$cap "$ampx" backends --json | python3 -c '
import json, sys
for b in json.load(sys.stdin)["backends"]:
    if b["name"] == "cpu" and b.get("device"):
        print(b["device"]["description"])')
in_use=$(printf '%s\n' "$desc" | sed -n 's/.*isa=\([a-z0-9]*\).*/\1/p')
if [ -z "$in_use" ]; then
  echo "FAIL: the CPU backend does not report its ISA path: '$desc'"
  exit 1
fi
if [ "$in_use" != "$cap" ]; then
  feats=$(printf '%s\n' "$desc" | sed -n 's/.*cpu features \([^;)]*\).*/\1/p')
  case $cap in
    avx2) why="this CPU lacks avx2+fma+f16c (features: $feats)" ;;
    portable) why="the portable path must always be available" ;;
    amx) if printf '%s' "$feats" | grep -q amx-bf16; then
         why="no amx kernels exist yet: amx runs the $in_use table (docs/CPU.md)"
       else
         why="this CPU (or its OS) lacks amx (features: $feats)"
       fi ;;
    *) why="this CPU (or its OS) lacks $cap (features: $feats)" ;;
  esac
  echo "skipped: AMPX_CPU_ISA=$cap runs isa=$in_use: $why"
  [ "$cap" = portable ] && exit 1
  exit 77
fi
echo "conformance under AMPX_CPU_ISA=$cap (isa=$in_use)"
# attention=1: the fused attention kernel is swept on every path, not only where the plugin
# claims it by default (the AVX-512 ones)
AMPX_BACKEND_OPTS="attention=1${AMPX_BACKEND_OPTS:+,$AMPX_BACKEND_OPTS}" AMPX_CPU_ISA=$cap exec "$suite" --jobs 2
