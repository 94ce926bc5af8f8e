#!/bin/sh
# `shardrec bench device` (cli/cmd_bench_device.c) on the CPU, --quick:
#  1. it runs to the end and prints a table row for the memory capacity, the
#     copy, gather and update at dims 16, 64, 128 on uniform and Zipf ids,
#     both hot shares and the fp32 GEMM;
#  2. the --out file is a topology file (include/shardrec/topology.h): the
#     keys bench device writes and no others (all of them known to the
#     planner's reader), every figure finite and > 0, three rates per id
#     law, one GEMM rate (fp32: the CPU has no other math mode); and
#     `shardrec plan --topology` (the planner's strict reader) takes it;
#  3. zipf_hot_share, the share of the drawn ids whose popularity rank is
#     below E/100, lies within 6 standard errors (a binomial share of the ids
#     drawn) of the exact share of the generator's law (src/data/zipf.c:
#     P(rank < H) = ((2H+1)^t - 1) / ((2E+1)^t - 1), t = 1 - 1.05), E and
#     the ids drawn read from the file's measurements. No timing relation is
#     asserted: rates on a shared 2-core machine move from run to run;
#  4. bad flags (an unknown flag, --device nosuch, --math tf32 on the CPU,
#     --out with no value) exit 2 with a one-line message naming the flag;
#  5. an --out that cannot be written (a missing folder, a directory) exits
#     2 with a message naming --out, before any measuring, and writes
#     nothing. (bench device reads no file, so no output can clash with an
#     input.)
# Exit 0 only if all passed; 77 without python3 (which reads the JSON).
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_python3
failed=0

fail() {
    failed=$((failed + 1))
    echo "FAILED: $*"
}

# 1. the run and its table
"$bin" bench device --device cpu --quick --out "$tmp/dev.json" >"$tmp/dev.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$tmp/dev.out"
    fail "bench device --quick: exit status $rc"
else
    cat "$tmp/dev.out"
    n=0
    for dist in uniform zipf:1.05; do
        for dim in 16 64 128; do
            for what in "gather" "update (sgd)"; do
                grep -q "^  $what  *$dim  *$dist " "$tmp/dev.out" && n=$((n + 1)) ||
                    fail "table: no row '$what' at dim $dim on $dist ids"
            done
        done
        grep -q "^  hot share (top 1%)  *-  *$dist " "$tmp/dev.out" ||
            fail "table: no hot share row for $dist ids"
    done
    for row in "memory capacity" "copy " "gemm fp32 "; do
        grep -q "^  $row" "$tmp/dev.out" || fail "table: no row '$row'"
    done
    [ "$n" -eq 12 ] && echo "ok: table: 12 gather/update rows, copy, GEMM, memory, hot shares"
fi

# 2, 3. the topology file
if [ "$rc" -eq 0 ]; then
    if python3 - "$tmp/dev.json" <<'EOF'; then echo "ok: JSON: fields, values, Zipf hot share"; else fail "JSON"; fi
import json, math, sys
d = json.load(open(sys.argv[1]))
# the keys the planner's reader knows (src/plan/topology.c, top_keys)
reader = {"name", "source", "backend", "device", "world_size", "ranks_per_node",
          "memory_bytes", "memory_base_bytes", "memory_gb_s", "gather_rows_s", "update_rows_s",
          "zipf_hot_share", "gemm_tflop_s", "links", "measurements", "launch_us"}
want = {"source", "device", "memory_bytes", "memory_base_bytes", "memory_gb_s", "gather_rows_s",
        "update_rows_s", "zipf_hot_share", "gemm_tflop_s", "measurements", "launch_us"}
assert set(d) == want, sorted(set(d) ^ want)
assert want <= reader
assert d["source"] == "shardrec bench device", d["source"]
assert d["device"] == "cpu", d["device"]

def positive(x, what):
    assert isinstance(x, (int, float)) and math.isfinite(x) and x > 0, (what, x)

positive(d["memory_bytes"], "memory_bytes")
positive(d["memory_gb_s"], "memory_gb_s")
positive(d["launch_us"], "launch_us")
assert d["launch_us"] < 1e4, d["launch_us"]  # an op's time, in microseconds
for key in ("gather_rows_s", "update_rows_s"):
    assert set(d[key]) == {"uniform", "zipf"}, (key, d[key])
    for law, rates in d[key].items():
        assert len(rates) == 3, (key, law, rates)
        for r in rates:
            positive(r, key + "." + law)
assert set(d["gemm_tflop_s"]) == {"fp32"}, d["gemm_tflop_s"]
positive(d["gemm_tflop_s"]["fp32"], "gemm_tflop_s.fp32")
share = d["zipf_hot_share"]
positive(share, "zipf_hot_share")
assert share <= 1, share

ms = d["measurements"]
hot = [m for m in ms if m["measurement"].startswith("hot share") and m["ids"] == "zipf:1.05"]
assert len(hot) == 1, hot
E, n = hot[0]["table_rows"], hot[0]["ids_drawn"]
t, H = 1 - 1.05, max(1, E // 100)
p = ((2 * H + 1) ** t - 1) / ((2 * E + 1) ** t - 1)
tol = 6 * math.sqrt(p * (1 - p) / n) + 1e-6
print("zipf_hot_share %.6f; the law gives %.6f for E %d (%d ids drawn, tolerance %.6f)"
      % (share, p, E, n, tol))
assert abs(share - p) <= tol, (share, p, tol)
emb = [m for m in ms if m["measurement"] in ("gather", "update (sgd)")]
assert len(emb) == 12, len(emb)
for m in emb:
    assert m["table_rows"] == E and m["unit"] == "rows/s", m
    positive(m["rate"], m["measurement"])
    positive(m["time_us"], m["measurement"])
EOF
fi

# 2b. the planner's own reader takes the file (merged over a preset, which
#     gives the links): on one rank a node, which keeps the host's figures
#     whole, its rates and hot share come out as written
if [ "$rc" -eq 0 ]; then
    "$bin" plan --topology cpu-2core --topology "$tmp/dev.json" --print-topology \
        --world-size 1 --ranks-per-node 1 \
        >"$tmp/plan.out" 2>&1
    prc=$?
    if [ "$prc" -eq 0 ] && python3 - "$tmp/dev.json" "$tmp/plan.out" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
t, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
for key in ("memory_bytes", "zipf_hot_share", "gather_rows_s", "update_rows_s"):
    assert t[key] == d[key], (key, t[key], d[key])
assert t["gemm_tflop_s"]["fp32"] == d["gemm_tflop_s"]["fp32"], t["gemm_tflop_s"]
EOF
        echo "ok: shardrec plan --topology reads the file"
    else
        cat "$tmp/plan.out"
        fail "shardrec plan --topology FILE: exit status $prc, or figures not as written"
    fi
fi

# 4. bad flags: exit 2, one line naming the flag
bad() { # NAME PATTERN ARGS...
    name=$1 pattern=$2
    shift 2
    "$bin" bench device "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/bad.err"; then
        echo "ok: $name: exit 2: $(cat "$tmp/bad.err")"
    else
        cat "$tmp/bad.err"
        fail "$name: exit status $rc, expected 2 and one line matching '$pattern'"
    fi
}
bad "unknown flag" "unknown flag --bogus" --bogus 1
bad "--device nosuch" "--device: 'nosuch'" --device nosuch
bad "--math tf32 on the CPU" "--math tf32 needs a CUDA device" --device cpu --math tf32
bad "--math nosuch" "--math: 'nosuch'" --math nosuch
bad "--out without a value" "--out needs a value" --out

# 5. an --out that cannot be written: exit 2 before measuring, nothing written
bad "--out in a missing folder" "--out" --device cpu --quick --out "$tmp/no/such/dir/t.json"
mkdir "$tmp/adir"
bad "--out a directory" "--out" --device cpu --quick --out "$tmp/adir"
[ -z "$(ls -A "$tmp/adir")" ] || fail "--out a directory: files appeared in it"
grep -q "^# shardrec bench device" "$tmp/bad.out" && fail "--out a directory: it measured first"

"$bin" bench device --help >"$tmp/help.out" 2>&1 && grep -q "^usage: shardrec bench device" "$tmp/help.out" &&
    echo "ok: --help" || fail "--help"

[ "$failed" -eq 0 ] && echo "check_bench_device: all passed" && exit 0
echo "check_bench_device: $failed failed"
exit 1
