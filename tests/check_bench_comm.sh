#!/bin/sh
# `shardrec bench comm` (cli/cmd_bench.c) on the CPU:
#  1. one process (a world of one): a table row for both collectives at every
#     size from 1 KiB to 1 MiB, and a --out JSON file with the documented
#     fields (docs/user-guide.md, "Measuring links"), "links" empty;
#  2. --comm nccl where NCCL cannot run (--device cpu; and with the default
#     device when no GPU is visible) stops with exit status 2 and the
#     message of sr_comm_init_nccl saying what is missing (a CUDA device, or
#     NCCL in this build);
#  3. 2 ranks under mpirun, on one node: every row's bus bandwidth > 0, the
#     header names backend mpi, world size 2, 2 ranks per node, device cpu;
#     the JSON holds links.intra_node and 12 measurements; with
#     --ranks-per-node 1, links.inter_node.
# Prints one line per check; exit 0 only if all passed; 77 without mpirun or
# python3 (which reads the JSON).
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_python3
failed=0

fail() {
    failed=$((failed + 1))
    echo "FAILED: $*"
}

# rows NAME W TABLE: a row per collective at 1K..1M; with W > 1 each busbw > 0
rows() {
    for coll in all_to_all all_reduce; do
        for size in 1024 4096 16384 65536 262144 1048576; do
            awk -v c="$coll" -v s="$size" -v w="$2" '
                $1 == s && $2 == c && $3 > 0 && $4 > 0 && (w == 1 || $5 > 0) { found = 1 }
                END { exit !found }' "$3" ||
                {
                    fail "$1: no row for $coll at $size bytes (or a zero bandwidth)"
                    cat "$3"
                    return
                }
        done
    done
    echo "ok: $1: rows for both collectives at 1 KiB..1 MiB"
}

# json NAME FILE W LINK: the fields, the world, the link kind ("" = none)
json() {
    if python3 - "$2" "$3" "$4" <<'EOF'; then echo "ok: $1: JSON fields"; else fail "$1: JSON"; fi
import json, sys
path, W, link = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(open(path))
assert d["source"] == "shardrec bench comm", d["source"]
assert d["backend"] == ("single" if W == 1 else "mpi"), d["backend"]
assert d["world_size"] == W and d["device"] == "cpu", d
assert d["ranks_per_node"] >= 1
ms = d["measurements"]
assert len(ms) == 12, len(ms)
for m in ms:
    assert set(m) == {"collective", "bytes", "time_us", "algbw_gb_s", "busbw_gb_s"}, m
    assert m["collective"] in ("all_to_all", "all_reduce") and m["time_us"] > 0, m
    assert m["busbw_gb_s"] > 0 if W > 1 else m["busbw_gb_s"] == 0, m
if not link:
    assert d["links"] == {}, d["links"]
else:
    assert list(d["links"]) == [link], d["links"]
    l = d["links"][link]
    assert l["bandwidth_gb_s"] > 0 and l["latency_us"] > 0, l
    big = [m for m in ms if m["collective"] == "all_to_all" and m["bytes"] == 1048576][0]
    assert l["bandwidth_gb_s"] == big["busbw_gb_s"], (l, big)
EOF
}

# 1. one process
"$bin" bench comm --max-bytes 1048576 --iters 3 --out "$tmp/w1.json" >"$tmp/w1.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    rows "1 process" 1 "$tmp/w1.out"
    json "1 process" "$tmp/w1.json" 1 ""
else
    cat "$tmp/w1.out"
    fail "1 process: exit status $rc"
fi

# 2. NCCL where it cannot run
nccl() { # NAME ARGS...
    name=$1
    shift
    "$bin" bench comm "$@" --comm nccl --max-bytes 4096 >"$tmp/nccl.out" 2>"$tmp/nccl.err"
    rc=$?
    # the message of sr_comm_init_nccl: one line
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/nccl.err")" -eq 1 ] &&
        grep -q "needs a CUDA device\|no NCCL backend\|no MPI\|no usable CUDA GPU" "$tmp/nccl.err"; then
        echo "ok: $name: exit 2: $(head -1 "$tmp/nccl.err")"
    else
        cat "$tmp/nccl.err"
        fail "$name: exit status $rc, expected 2 and a message naming what is missing"
    fi
}
nccl "--device cpu --comm nccl" --device cpu
if ! nvidia-smi -L >/dev/null 2>&1; then
    nccl "--comm nccl without a GPU"
fi

# 3. two ranks
sr_need_mpirun
# stderr apart: a launcher's warning must not split a table row
sr_mpirun 2 "$bin" bench comm --max-bytes 1048576 --iters 5 --out "$tmp/w2.json" \
    >"$tmp/w2.out" 2>"$tmp/w2.err"
rc=$?
if [ "$rc" -eq 0 ]; then
    rows "2 ranks" 2 "$tmp/w2.out"
    for h in "backend  *mpi" "world size  *2" "ranks per node  *2" "device  *cpu"; do
        grep -q "^# $h" "$tmp/w2.out" || fail "2 ranks: no header line '# $h'"
    done
    json "2 ranks" "$tmp/w2.json" 2 intra_node
else
    cat "$tmp/w2.out" "$tmp/w2.err"
    fail "2 ranks: exit status $rc"
fi
sr_mpirun 2 "$bin" bench comm --max-bytes 1048576 --iters 2 --ranks-per-node 1 \
    --out "$tmp/n2.json" >"$tmp/n2.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    json "2 ranks as 2 nodes" "$tmp/n2.json" 2 inter_node
else
    cat "$tmp/n2.out"
    fail "2 ranks as 2 nodes: exit status $rc"
fi

[ "$failed" -eq 0 ] && echo "check_bench_comm: all passed" && exit 0
echo "check_bench_comm: $failed failed"
exit 1
