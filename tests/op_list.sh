#!/usr/bin/env bash
# op_list.sh SOURCE_DIR — backend.h's AMPX_OPS, the one list of the backend ops, against what
# is written about each op elsewhere, so that nothing drifts from it:
#   - the lines number the ops 0, 1, 2, ... and each minor's AMPX_OP_COUNT_V1_x ends a prefix;
#   - backend.h's heading of each op ("GEMM  dtypes {A, B, C}") names n_dtypes dtypes, those
#     the f32 column marks written "f32";
#   - docs/PLUGINS.md's table of the ops has the op's row: number, name, args struct, the
#     heading's dtypes, the minor that added it, its case file;
#   - that case file defines the op's conformance cases (conf_op_<slot>), and no other does;
#   - docs/CONFORMANCE.md's "Cases per op" table has a row that names the op.
set -u
src=$1
python3 - "$src" <<'PY'
import glob, os, re, sys
src = sys.argv[1]
bad = 0
def fail(msg):
    global bad
    print("FAIL " + msg)
    bad += 1

# backend.h and the headers it includes (backend_types.h: AMPX_OPS; backend_args.h: headings)
hdr = "".join(open(f).read() for f in sorted(glob.glob(src + "/core/include/ampx/backend*.h")))
body = re.search(r'#define AMPX_OPS\(X\)((?:.*\\\n)*.*)', hdr).group(1)
body = re.sub(r'/\*.*?\*/', '', body.replace("\\\n", "\n"))
ops = [tuple(x.strip() for x in g.split(","))
       for g in re.findall(r'X\(([^)]*)\)', body)]
if len(ops) < 27:
    sys.exit("found only %d ops in AMPX_OPS: the pattern no longer matches" % len(ops))
counts = sorted((int(n), "1.%s" % v) for v, n in re.findall(r'AMPX_OP_COUNT_V1_(\d+)\s*=\s*(\d+)', hdr))

def since(i):
    for n, v in counts:
        if i < n: return v
    return None

# the headings: "/* GEMM  dtypes {A, B, C}" or " * ACT_BWD  dtypes {x, dy, dx}: ..."
headings = {}
for name, dts in re.findall(r'^(?:/\*| \*) ([A-Z][A-Z0-9_]+)  dtypes \{([^}]*)\}', hdr, re.M):
    headings[name] = [d.strip() for d in dts.split(",") if d.strip()]
for name in re.findall(r'^(?:/\*| \*) ([A-Z][A-Z0-9_]+)  \(no dtypes', hdr, re.M):
    headings[name] = []

table = {}
for line in open(src + "/docs/PLUGINS.md"):
    r = re.match(r'\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|\s*`(\w+)`\s*\|([^|]*)\|\s*([\d.]+)\s*\|\s*([\w.]+)\s*\|', line)
    if r:
        cell = r.group(4).strip()
        dts = [] if cell == "none" else [d.strip() for d in cell.strip("{}").split(",")]
        table[r.group(2)] = (int(r.group(1)), r.group(3), dts, r.group(5), r.group(6))

cases = {}
for f in sorted(glob.glob(src + "/core/src/conformance/cases_*.c")):
    for slot in re.findall(r'^const conf_op_cases conf_op_(\w+)\s*=', open(f).read(), re.M):
        cases.setdefault(slot, []).append(os.path.basename(f))

conf = open(src + "/docs/CONFORMANCE.md").read()
sec = conf.split("## Cases per op", 1)[-1].split("\n## ", 1)[0]
named = set()
for cell in re.findall(r'^\|\s*([^|]+?)\s*\|', sec, re.M):
    cell = re.sub(r'\(.*?\)', '', cell)
    prev = None
    for part in [p.strip() for p in cell.split("/")]:
        if not re.fullmatch(r'[A-Z0-9_]+', part): continue
        if prev and "_" not in part and "_" in prev:  # "LAYERNORM_FWD / BWD"
            part = prev.rsplit("_", 1)[0] + "_" + part
        named.add(part)
        prev = part

for i, (index, slot, OP, args, n, f32) in enumerate(ops):
    n, f32 = int(n), int(f32)
    if int(index) != i:
        fail("AMPX_OPS line %d (%s) says index %s" % (i, slot, index))
    h = headings.get(OP)
    want = [d.split()[0] + (" f32" if f32 >> k & 1 else "") for k, d in enumerate(h or [])]
    if h is None:
        fail("backend.h has no heading '%s  dtypes {...}' for op %s" % (OP, slot))
    elif len(h) != n or h != want:
        fail("backend.h's heading of %s is {%s}; AMPX_OPS says %d dtypes, f32 mask %d"
             % (OP, ", ".join(h), n, f32))
    row = table.get(slot)
    if row is None:
        fail("docs/PLUGINS.md's table of the ops has no row for %s" % slot)
    else:
        exp = (i, args, h or [], since(i))
        if row[:4] != exp:
            fail("docs/PLUGINS.md's row of %s says %s, AMPX_OPS and backend.h %s" % (slot, row[:4], exp))
        if cases.get(slot) != [row[4]]:
            fail("%s: docs/PLUGINS.md names %s, conf_op_%s is defined in %s"
                 % (slot, row[4], slot, cases.get(slot) or "no case file"))
    if OP not in named:
        fail("docs/CONFORMANCE.md's \"Cases per op\" has no row for %s" % OP)
for slot in sorted(set(table) - {o[1] for o in ops}):
    fail("docs/PLUGINS.md's table lists %s, which is not in AMPX_OPS" % slot)
for slot in sorted(set(cases) - {o[1] for o in ops}):
    fail("conf_op_%s (%s) is no op of AMPX_OPS" % (slot, ", ".join(cases[slot])))
print("op_list: %d ops, %d rows, %d case entries, %d failure(s)" % (len(ops), len(table), len(cases), bad))
sys.exit(1 if bad else 0)
PY
