#!/bin/sh
# --workload D on the CPU at toy size (issue 18, "workload D as one flag"):
# MLPerf DLRM-DCNv2's model (DCNv2, 3 cross layers of rank 512, dim 128, its
# MLPs), its multi-hot sizes per feature (214 ids a sample), Zipf ids and
# Adagrad / row-wise Adagrad, with --table-rows shrinking the 26 tables to
# 1000 rows and --batch-size 32, written before and after --workload. Three
# steps train with finite losses and evaluate; the job line echoes the
# preset and the overrides. A flag given before --workload still wins
# (--ids-per-feature 1: 26 ids a sample).
sr_threads=keep
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
rows=$(printf '1000,%.0s' $(seq 25))1000
fail=0

run() { # NAME ARGS...
    name=$1; shift
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1 "$bin" train "$@" --steps 3 \
        --eval-samples 64 --log-every 1 --no-progress --metrics "$tmp/$name.jsonl" \
        2>"$tmp/$name.err" || { echo "FAIL $name: exit status $?"; cat "$tmp/$name.err"; fail=1; }
}
expect_line() { # NAME PATTERN: the job line
    grep -q -- "$2" "$tmp/$1.err" ||
        { echo "FAIL $1: the job line lacks '$2'"; grep '^shardrec train:' "$tmp/$1.err"; fail=1; }
}

run d --batch-size 32 --workload D --table-rows "$rows"
expect_line d "workload D, 26 tables (26000 rows, 12.7 MiB in fp32), 26 features (up to 214 ids a sample)"
expect_line d "dim 128, dcn, batch 32, 3 steps, optimizer adagrad / embeddings rowwise_adagrad"
# three finite training losses and a finite evaluation
awk -F'"loss": *' 'NF > 1 { split($2, v, /[,}]/); n++
        if (v[1] !~ /^[0-9.e+-]+$/ || v[1] + 0 > 100) { print "FAIL: loss " v[1] " at line " NR; bad = 1 } }
    END { if (n != 3) { print "FAIL: " n " loss lines, expected 3"; bad = 1 } exit bad }' \
    "$tmp/d.jsonl" || fail=1
grep -q '^eval on 64 held-back samples: AUC 0\.[0-9]*  logloss [0-9.]*  ' "$tmp/d.err" ||
    { echo "FAIL: no finite evaluation"; grep '^eval' "$tmp/d.err"; fail=1; }
grep '^eval on\|^last training loss' "$tmp/d.err"

run d1 --ids-per-feature 1 --workload D --table-rows "$rows" --batch-size 32
expect_line d1 "26 features (up to 26 ids a sample), dim 128, dcn, batch 32"
[ "$fail" -eq 0 ] && echo "ok: workload D at 1000 rows a table trains on the CPU"
exit $fail
