#!/bin/sh
# Ranks whose --data ends at different steps stop together (the end flag in
# the input dist's counts exchange), never a hang. Each rank runs in its own
# directory on a file named d.tsv of the same size (so the start-up check
# passes), but one rank's copy has its last 64 lines made bad (label 'x'):
# under --skip-bad-lines that rank runs out two global batches early. Every
# rank must stop at that step: exit 0, the same number of steps logged, and
# rank 0 warns which rank ran out. Hard timeout per run. Skips without MPI.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_mpirun
sr_need_built "$bin"
sr_timeout=120 sr_timeout_opts="-s KILL"
ROWS=1000,2000,50
JOB="--table-rows $ROWS --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1 --eval-samples 0
     --log-every 1 --no-progress --skip-bad-lines --comm-timeout 30"
fail=0

"$bin" gen --out "$tmp/full.tsv" --samples 320 --table-rows $ROWS || exit 1
# the same bytes, the last 64 lines bad
awk 'NR > 256 { sub(/^[01]/, "x") } { print }' "$tmp/full.tsv" >"$tmp/short.tsv"
cmp -s "$tmp/full.tsv" "$tmp/short.tsv" && { echo "FAIL: short.tsv equals full.tsv"; exit 1; }
[ "$(wc -c <"$tmp/full.tsv")" -eq "$(wc -c <"$tmp/short.tsv")" ] || exit 1

# name np short-rank: global batch 16*np, so the full file holds 320/(16*np)
# whole batches and the short one 256/(16*np)
run_case() {
    name=$1 np=$2 short=$3
    G=$((16 * np))
    expect=$((256 / G))
    for r in $(seq 0 $((np - 1))); do
        mkdir -p "$tmp/$name/r$r"
        if [ "$r" -eq "$short" ]; then
            cp "$tmp/short.tsv" "$tmp/$name/r$r/d.tsv"
        else
            cp "$tmp/full.tsv" "$tmp/$name/r$r/d.tsv"
        fi
    done
    # shellcheck disable=SC2016
    sr_mpirun "$np" sh -c 'cd "$0/r$OMPI_COMM_WORLD_RANK" && exec "$@"' "$tmp/$name" \
        "$bin" train $JOB --global-batch-size "$G" --data d.tsv --metrics "$tmp/$name.jsonl" \
        >"$tmp/$name.out" 2>&1
    rc=$?
    steps=$(tail -1 "$tmp/$name.jsonl" 2>/dev/null | sed -n 's/.*"step": *\([0-9]*\).*/\1/p')
    why=""
    [ "$rc" -eq 0 ] || why="$why exit status $rc;"
    [ "$steps" = "$expect" ] || why="$why last logged step '$steps', expected $expect;"
    grep -q "warning: the --data of rank $short ended at step $((expect + 1)) while $((np - 1)) other ranks still had data" \
        "$tmp/$name.out" || why="$why no warning naming rank $short;"
    if [ -n "$why" ]; then
        echo "FAIL $name:$why"
        tail -20 "$tmp/$name.out"
        fail=1
    else
        echo "ok   $name: every rank stopped after step $steps, exit 0, rank $short named"
    fi
}

run_case end2_last 2 1
run_case end3_first 3 0
exit $fail
