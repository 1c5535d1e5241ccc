#!/usr/bin/env bash
# lint.sh — the checks CI runs before the tests: every C, CUDA and OpenCL source in git is
# formatted as .clang-format says (clang-format --dry-run --Werror); no source file in
# core/src, core/include (the public headers, plugin_kit.h's kit among them), plugins/ or
# tools/ is over 900 lines, and no function there over 120 lines or of cyclomatic complexity
# over 40 (lizard, from PyPI); and cppcheck finds nothing in core/ and plugins/ among the
# checks the tree is clean of. Exit 1 on a finding.
#
# cppcheck: --enable=warning,style,performance,portability, less the ids below, each of which
# fires on code that is right on purpose:
#   invalidPointerCast       the GEMM and AMP paths read f32 buffers as their bit patterns
#   knownConditionTrueFalse  compile-time ISA and dtype constants in shared loop bodies
#   variableScope, constParameter, constVariable, shadowFunction, shadowVariable, unreadVariable
#                            style preferences the house style does not follow
#   clarifyCalculation       a ?: inside arithmetic, formatted by clang-format as it is
#   uninitvar, legacyUninitvar, invalidFunctionArg, nullPointerArithmeticRedundantCheck
#                            cppcheck 2.10 misreads designated initializers, out-params and
#                            guards that hold on every path (a row of at least one column)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh --lint
fails=0
mapfile -t srcs < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cl')
bad=()
for f in "${srcs[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "lint: not formatted (clang-format -i FILE): ${bad[*]}"
  fails=$((fails + 1))
fi
echo "lint: clang-format checked ${#srcs[@]} files, ${#bad[@]} not formatted"
mapfile -t sized < <(git ls-files 'core/src/*.[ch]' 'core/include/*.h' 'plugins/*.[ch]' 'tools/*.[ch]')
long=()
for f in "${sized[@]}"; do
  [ "$(wc -l <"$f")" -le 900 ] || long+=("$f ($(wc -l <"$f") lines)")
done
if [ ${#long[@]} -gt 0 ]; then
  echo "lint: over 900 lines: ${long[*]}"
  fails=$((fails + 1))
fi
python3 -c 'import lizard' 2>/dev/null || python3 -m pip install -q lizard >/dev/null 2>&1 ||
  { echo "lint: lizard could not be installed (pip install lizard)"; exit 1; }
if ! python3 -m lizard -C 40 -L 120 -w "${sized[@]}"; then
  echo "lint: the functions above are over 120 lines or of cyclomatic complexity over 40"
  fails=$((fails + 1))
fi
echo "lint: sizes checked in ${#sized[@]} files of core/src, core/include, plugins/ and tools/"
suppress=(invalidPointerCast knownConditionTrueFalse variableScope constParameter constVariable
  shadowFunction shadowVariable unreadVariable clarifyCalculation uninitvar legacyUninitvar
  invalidFunctionArg nullPointerArithmeticRedundantCheck)
args=(-q --std=c11 --enable=warning,style,performance,portability --inline-suppr
  --error-exitcode=1 -j "$(nproc)" -D__x86_64__ -DAMPX_HAVE_MPI
  -I core/include -I core/src -I plugins/cpu)
for s in "${suppress[@]}"; do args+=("--suppress=$s"); done
if cppcheck "${args[@]}" core/src plugins; then
  echo "lint: cppcheck clean on core/ and plugins/"
else
  echo "lint: cppcheck found the above in core/ or plugins/"
  fails=$((fails + 1))
fi
exit $((fails > 0))
