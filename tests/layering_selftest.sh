#!/usr/bin/env bash
# layering_selftest.sh ROOT — tests/layering.sh catches every spelling of a bad include: it
# copies ROOT's core/src to a temporary folder, checks the clean copy passes (with legal
# includes planted too), then plants each bad form in turn and checks the script fails.
set -uo pipefail
root=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
layering() { bash "$here/layering.sh" "$tmp/copy" >"$tmp/out" 2>&1; }
fresh() {
  rm -rf "$tmp/copy"
  mkdir -p "$tmp/copy/core"
  cp -R "$root/core/src" "$tmp/copy/core/src"
}
# expect WANT WHAT FILE LINE: plants LINE at the top of FILE (created if missing) in a fresh
# copy; layering.sh must exit 0 (WANT=pass) or 1 (WANT=fail).
expect() {
  local want=$1 what=$2 file=$3 line=$4 rc
  fresh
  mkdir -p "$(dirname "$tmp/copy/core/src/$file")"
  { printf '%s\n' "$line"; cat "$tmp/copy/core/src/$file" 2>/dev/null; } >"$tmp/planted"
  mv "$tmp/planted" "$tmp/copy/core/src/$file"
  layering
  rc=$?
  if { [ "$want" = pass ] && [ "$rc" -ne 0 ]; } || { [ "$want" = fail ] && [ "$rc" -ne 1 ]; }; then
    echo "FAIL: $what: layering.sh exited $rc, expected it to $want"
    sed 's/^/  /' "$tmp/out"
    fails=$((fails + 1))
  else
    echo "ok: $what (expected to ${want})"
  fi
}

fresh
if layering; then echo "ok: the clean copy passes"; else
  echo "FAIL: the clean copy fails"
  sed 's/^/  /' "$tmp/out"
  fails=$((fails + 1))
fi
# legal: earlier stages in every spelling, the own folder, system and public headers
expect pass 'an earlier stage' exec/executor.c '#include "graph/graph.h"'
expect pass '../ to an earlier stage' exec/executor.c '#include "../graph/graph.h"'
expect pass 'angle brackets, an earlier stage' exec/executor.c '#include <graph/graph.h>'
expect pass 'a file beside the includer' graph/softmax.c '#include "ops.h"'
expect pass 'a system header with a folder' graph/softmax.c '#include <sys/stat.h>'
expect pass 'a public header' graph/softmax.c '#  include <ampx/backend.h>'
expect pass 'a nested file, ../ to its own stage' exec/sub/z.c '#include "../trainer.h"'
expect pass 'the passes before backend' backend/call.c '#include "passes/planner.h"'
# illegal: a later stage in every spelling
expect fail 'a later stage' graph/softmax.c '#include "exec/trainer.h"'
expect fail '../ to a later stage' graph/softmax.c '#include "../exec/trainer.h"'
expect fail 'angle brackets, a later stage' graph/softmax.c '#include <exec/trainer.h>'
expect fail 'spaces after #' graph/softmax.c '#  include "exec/trainer.h"'
expect fail 'indented, a tab after #' graph/softmax.c "  #	include \"exec/trainer.h\""
expect fail 'a nested file' graph/sub/z.c '#include "exec/trainer.h"'
expect fail 'a nested file, ../../' graph/sub/z.c '#include "../../exec/trainer.h"'
expect fail 'a deeper nested file' graph/sub/deeper/z.h '#include <obs/trace.h>'
expect fail 'the passes reaching a backend' passes/planner.c '#include "backend/call.h"'
expect fail 'the step reaching a hook of a later stage' exec/step.c '#include "watch/monitor.h"'
expect fail 'a header of a later stage' graph/graph.h '#include "passes/model.h"'
expect fail 'conformance reaching the core' conformance/harness.c '#include "graph/graph.h"'
expect fail 'a folder not in the order' newstage/x.c '#include "base/error.h"'
echo "layering selftest: $fails failure(s)"
exit $((fails > 0))
