#!/usr/bin/env bash
# plugin_docs.sh SOURCE_DIR — the table of node kinds and backend ops in docs/PLUGINS.md
# against the graph rules themselves (g_rule.ops in core/src/graph/*.c): every rule has its
# row, every row is a rule, and the ops listed are the rule's, in its order.
set -u
src=$1
python3 - "$src" <<'PY'
import glob, re, sys
src = sys.argv[1]
rules = {}
for f in sorted(glob.glob(src + "/core/src/graph/*.c")):
    text = open(f).read()
    for m in re.finditer(r'const g_rule g_rule_\w+\s*=\s*\{\s*"(\w+)",\s*\{([^}]*)\}', text):
        ops = [o.strip() for o in m.group(2).split(",") if o.strip()]
        ops = ops[: ops.index("AMPX_OP_COUNT")] if "AMPX_OP_COUNT" in ops else ops
        rules[m.group(1)] = (f.split("/")[-1], [o[len("AMPX_OP_"):] for o in ops])
if len(rules) < 20:
    sys.exit("found only %d rules in core/src/graph: the pattern no longer matches" % len(rules))
table = {}
for line in open(src + "/docs/PLUGINS.md"):
    m = re.match(r'\|\s*`(\w+)`\s*\|\s*(\w+\.c)\s*\|\s*([^|]*)\|', line)
    if m:
        cell = m.group(3).strip()
        ops = [] if cell.startswith("(none") else [o.strip() for o in cell.split(",")]
        table[m.group(1)] = (m.group(2), ops)
bad = 0
for name, (f, ops) in sorted(rules.items()):
    if name not in table:
        print("FAIL docs/PLUGINS.md has no row for node kind %s (%s: %s)" % (name, f, ", ".join(ops)))
        bad += 1
    elif table[name] != (f, ops):
        print("FAIL %s: the table says %s %s, the rule %s %s" % (name, table[name][0], table[name][1], f, ops))
        bad += 1
for name in sorted(set(table) - set(rules)):
    print("FAIL docs/PLUGINS.md lists %s, which is no graph rule" % name)
    bad += 1
print("plugin_docs: %d rules, %d rows, %d failure(s)" % (len(rules), len(table), bad))
sys.exit(1 if bad else 0)
PY
