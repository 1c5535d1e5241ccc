# cli_lib.sh — sourced by the CLI tests: fail() counts a failure, expect_error checks that a
# command fails as a user should see it. The sourcing script sets $work (a scratch folder)
# and fails=0 first.

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NAME RC PATTERN CMD...: exit status RC, one line on stderr matching PATTERN.
expect_error() {
  local name=$1 want=$2 pattern=$3
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq "$want" ] || fail "$name: exit $rc, expected $want ($(cat "$work/err"))"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: expected one line, got: $(cat "$work/err")"
  grep -Eq -- "$pattern" "$work/err" || fail "$name: '$(cat "$work/err")' does not match '$pattern'"
}
