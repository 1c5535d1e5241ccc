#!/usr/bin/env bash
# install.sh BUILD_DIR — `cmake --install` into a fresh prefix, then use the installed tree
# as a user and a vendor would: the installed ampx finds its CPU plugin with no environment,
# pkg-config and find_package(ampx) both build a program against libampx, a plugin built
# from the installed headers alone loads, and the example plugin (docs/examples/plugin),
# built out of tree with find_package(ampx) and with make + pkg-config ampx-plugin, passes
# `ampx conformance` and trains models/mlp.json.
set -u
build=$1
src=$(cd "$(dirname "$0")/.." && pwd)
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1
check "cmake --install succeeds" test $? -eq 0
libdir=$(dirname "$(find "$prefix" -name 'libampx.so' | head -n1)")
check "libampx.so installed" test -f "$libdir/libampx.so"
check "cpu plugin installed" test -f "$libdir/ampx/libampx-cpu.so"
check "headers installed" test -f "$prefix/include/ampx/backend.h" -a -f "$prefix/include/ampx/dtype.h" -a -f "$prefix/include/ampx/ampx.h"
check "pkg-config file installed" test -f "$libdir/pkgconfig/ampx.pc"
check "plugin pkg-config file installed" test -f "$libdir/pkgconfig/ampx-plugin.pc"
check "plugin_kit.h installed" test -f "$prefix/include/ampx/plugin_kit.h"
# the headers backend.h and plugin_kit.h include, each of them (a plugin includes only those two)
for h in backend_types.h backend_args.h kit/base.h kit/take_dense.h kit/take_train.h \
  kit/take_layout.h kit/host.h kit/shell.h; do
  check "$h installed" test -f "$prefix/include/ampx/$h"
done
check "kernel_math.h installed" test -f "$prefix/include/ampx/kernel_math.h"
# core/internal (fault injection for the project's tests and tools) is not part of the API
check "internal headers not installed" test ! -e "$prefix/include/ampx/inject.h"
check "CMake package installed" test -f "$libdir/cmake/ampx/ampxConfig.cmake"

env -u AMPX_PLUGIN_PATH -u LD_LIBRARY_PATH "$prefix/bin/ampx" backends >"$tmp/out" 2>&1
check "installed ampx finds its cpu plugin" grep -q "$libdir/ampx/libampx-cpu.so" "$tmp/out"
# The ABI version, as the installed backend.h states it.
abi=$(awk '/^#define AMPX_ABI_MAJOR/ {ma = $3} /^#define AMPX_ABI_MINOR/ {mi = $3}
           END {print ma "." mi}' "$prefix/include/ampx/backend.h")
check "installed cpu plugin is available" grep -qF "ABI $abi, available" "$tmp/out"

cat >"$tmp/consumer.c" <<'C'
#include <stdio.h>
#include "ampx/ampx.h"
int main(void) {
    char err[1024];
    ampx_backend *be;
    if (ampx_backend_open("cpu", NULL, 0, &be, err, sizeof err) != AMPX_OK) { puts(err); return 1; }
    printf("%s %u.%u\n", ampx_backend_iface_of(be)->name, ampx_backend_iface_of(be)->abi_major,
           ampx_backend_iface_of(be)->abi_minor);
    ampx_backend_close(be);
    return 0;
}
C
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c11 "$tmp/consumer.c" $(pkg-config --cflags --libs ampx) -o "$tmp/consumer" 2>"$tmp/cc.log"
check "pkg-config builds a program against libampx" test $? -eq 0
LD_LIBRARY_PATH=$libdir "$tmp/consumer" >"$tmp/out" 2>&1
check "that program opens the installed cpu backend" grep -qF "cpu $abi" "$tmp/out"

mkdir -p "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(ampx 0.1 REQUIRED)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE ampx::ampx)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cm.log" 2>&1 &&
  cmake --build "$tmp/cm/build" >>"$tmp/cm.log" 2>&1
check "find_package(ampx) builds a program" test $? -eq 0
"$tmp/cm/build/consumer" >"$tmp/out" 2>&1
check "that program opens the cpu backend" grep -qF "cpu $abi" "$tmp/out"

# docs/examples/memory: a program that trains a model on rows it makes in memory, built out of
# tree against the installed package (the C API of docs/C_API.md)
cc -std=c11 -Wall -Werror "$src/docs/examples/memory/train_memory.c" $(pkg-config --cflags --libs ampx) \
  -o "$tmp/train_memory" 2>"$tmp/cc.log"
check "the in-memory training example builds against the installed package" test $? -eq 0
env -u AMPX_PLUGIN_PATH LD_LIBRARY_PATH=$libdir "$tmp/train_memory" "$src/docs/examples/memory/xor.json" \
  >"$tmp/out" 2>&1
check "it trains on its own rows ($(tail -n1 "$tmp/out"))" \
  awk '/^held-out accuracy/ { ok = $3 > 0.9 && $5 == 1000 } END { exit !ok }' "$tmp/out"

# A vendor plugin from the installed headers only: the test plugin without an entry symbol
# is enough to prove the headers stand alone; a full one is the CPU plugin's own sources.
cc -std=c11 -O1 -fPIC -shared -fvisibility=hidden -I"$prefix/include" \
  "$src"/plugins/cpu/*.c -o "$tmp/libampx-vendor.so" -lpthread -lm 2>"$tmp/vendor.log"
check "a plugin builds from the installed headers alone" test $? -eq 0
exported=$(nm -D --defined-only "$tmp/libampx-vendor.so" | awk '{print $3}' | grep -v '^_' | tr '\n' ' ')
check "the plugin exports only ampx_backend_entry (got: $exported)" test "$exported" = "ampx_backend_entry "
"$prefix/bin/ampx" conformance --backend "$tmp/libampx-vendor.so" --quick --op gemm >"$tmp/out" 2>&1
check "ampx conformance runs the vendor plugin" grep -qE '^[0-9]+ passed, 0 failed' "$tmp/out"

# The example plugin, out of tree, both ways. ampx-plugin carries the headers and no -lampx.
plugin_libs=$(pkg-config --libs ampx-plugin)
check "pkg-config ampx-plugin links nothing of ampx (got: '$plugin_libs')" test -z "$plugin_libs"
cp -r "$src/docs/examples/plugin" "$tmp/example"
make -C "$tmp/example" >"$tmp/make.log" 2>&1
check "the example plugin builds with make and pkg-config" test -f "$tmp/example/libampx-example.so"
cmake -S "$tmp/example" -B "$tmp/example/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/excm.log" 2>&1 &&
  cmake --build "$tmp/example/build" >>"$tmp/excm.log" 2>&1
check "the example plugin builds with find_package(ampx)" test -f "$tmp/example/build/libampx-example.so"
check "the example plugin's CMake build is optimised by default" grep -qx "CMAKE_BUILD_TYPE:STRING=Release" "$tmp/example/build/CMakeCache.txt"
ex=$tmp/example/build/libampx-example.so
needed=$(readelf -d "$ex" 2>/dev/null | awk '/NEEDED/ {print $NF}' | tr '\n' ' ')
check "the example plugin does not link libampx (NEEDED: $needed)" sh -c "! echo '$needed' | grep -q libampx"
exported=$(nm -D --defined-only "$ex" | awk '{print $3}' | grep -v '^_' | tr '\n' ' ')
check "the example plugin exports only ampx_backend_entry (got: $exported)" test "$exported" = "ampx_backend_entry "
"$prefix/bin/ampx" conformance --backend "$ex" --quick >"$tmp/exconf" 2>&1; rc=$?
check "ampx conformance passes the example plugin (rc $rc)" test $rc -eq 0
check "... with every op of the minimum set run" grep -qE '^[0-9]+ passed, 0 failed, [0-9]+ unsupported; 11 ops run, 11 passing: PASS' "$tmp/exconf"
"$prefix/bin/ampx" conformance --backend "$tmp/example/libampx-example.so" --quick --op gemm >"$tmp/out" 2>&1
check "the make-built example plugin runs conformance too" grep -q ': PASS$' "$tmp/out"
"$prefix/bin/ampx" train "$src/models/mlp.json" --backend "$ex" --steps 200 --quiet >"$tmp/extrain" 2>&1; rc=$?
check "ampx train models/mlp.json runs on the example plugin (rc $rc)" test $rc -eq 0
acc=$(sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$tmp/extrain")
check "... and learns: held-out accuracy ${acc:-?}% > 80% (chance is 33%)" awk -v a="${acc:-0}" 'BEGIN {exit !(a > 80)}'
# With the plugin installed into ampx's plugin folder, it is a backend by name.
cmake --install "$tmp/example/build" >"$tmp/exinst.log" 2>&1
env -u AMPX_PLUGIN_PATH "$prefix/bin/ampx" backends >"$tmp/out" 2>&1
check "installed, the example plugin is --backend example" grep -qE '^example ' "$tmp/out"

# What a user gets beside the binary: models, docs, the man page, bash completion.
check "models installed" test -f "$prefix/share/ampx/models/mlp.json" -a -f "$prefix/share/ampx/models/gpt.json"
check "docs installed" test -f "$prefix/share/doc/ampx/MODEL_FORMAT.md" -a -f "$prefix/share/doc/ampx/LANGUAGE_MODELS.md"
check "man page installed" test -f "$prefix/share/man/man1/ampx.1"
check "bash completion installed" test -f "$prefix/share/bash-completion/completions/ampx"
check "the completion completes commands" bash -c '
  source "$1"; COMP_WORDS=(ampx tr); COMP_CWORD=1; _ampx; [ "${COMPREPLY[*]}" = "train trace-summary" ]' _ \
  "$prefix/share/bash-completion/completions/ampx"
check "the installed models train from the install tree" env -u AMPX_PLUGIN_PATH "$prefix/bin/ampx" \
  train "$prefix/share/ampx/models/mlp.json" --steps 20 --quiet
if command -v man >/dev/null; then
  check "the man page renders" bash -c 'MANWIDTH=80 man -l "$1" 2>/dev/null | grep -q "EXIT STATUS"' _ "$prefix/share/man/man1/ampx.1"
fi

echo "install: $fails failure(s)"
test $fails -eq 0
