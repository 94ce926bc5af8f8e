#!/bin/sh
# The command line: --help works and is complete, bad flags, inconsistent
# shapes and missing files give a one-line error and exit status 2.
sr_threads=keep
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
fail=0

expect() { # expect STATUS PATTERN -- ARGS...
    want=$1; pat=$2; shift 3
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: shardrec $* exited $got, expected $want"; cat "$tmp/err"; fail=1; return
    fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
        echo "FAIL: shardrec $*: output lacks '$pat'"; cat "$tmp/err"; fail=1; return
    fi
    if [ "$want" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
        echo "FAIL: shardrec $*: error is not one line"; cat "$tmp/err"; fail=1
    fi
}

expect 0 "--steps" -- train --help
# every flag the help lists is accepted by the parser (no flag is documented but unknown)
for flag in $("$bin" train --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    case $flag in --help|--config|--progress|--no-progress) continue ;; esac
    # the trailing bad --steps stops the job right after the flag was parsed
    "$bin" train "$flag" x --steps 0 2>"$tmp/err" >/dev/null
    if grep -q "unknown flag" "$tmp/err"; then echo "FAIL: documented flag $flag is unknown"; fail=1; fi
done
expect 2 "unknown flag --bogus" -- train --bogus 1
expect 2 "--steps" -- train --steps abc
expect 2 "--steps" -- train --steps
expect 2 "--batch-size" -- train --batch-size 0
expect 2 "embedding" -- train --bot-mlp 13-64-32
expect 2 "13" -- train --bot-mlp 12-64-16
expect 2 "top" -- train --top-mlp 64-2
expect 2 "optimizer" -- train --optimizer lbfgs
expect 2 "embeddings only" -- train --optimizer rowwise_adagrad
expect 2 "id-dist\|zipf" -- train --id-dist zipf:-1
expect 2 "--table-rows" -- train --table-rows 10,,20
expect 2 "nonexistent.json" -- train --config /nonexistent.json
expect 2 "--trace" -- train --steps 1 --trace /nonexistent/dir/t.json
expect 2 "--trace-steps" -- train --trace t.json --trace-steps 5:2
expect 2 "--trace-steps" -- train --trace t.json --trace-steps 3
expect 2 "--comm-dtype" -- train --comm-dtype int8
expect 2 "--dense-comm-dtype" -- train --dense-comm-dtype fp8
expect 2 "p_missing.json" -- train --steps 1 --plan p_missing.json
expect 2 "sharding" -- train --sharding zz
expect 2 "--comm: 'gloo'" -- train --comm gloo
expect 2 "--comm nccl" -- train --comm nccl --device cpu --steps 1
expect 2 "--metrics" -- train --steps 1 --metrics /nonexistent/dir/m.jsonl
expect 2 "unknown command" -- frobnicate
expect 2 "--out" -- gen --samples 10
expect 2 "multi-hot\|one id\|ids per feature" -- gen --out "$tmp/x.tsv" --ids-per-feature 2
# --ids-per-feature per feature: exactly F entries (the message names both
# counts), each N or MIN-MAX; gen too
expect 2 "--ids-per-feature: 2 entries for 26 features" -- train --ids-per-feature 1,2
expect 2 "--ids-per-feature: 'x' is not an integer (entry 2)" -- train --ids-per-feature 1,x
expect 2 "--ids-per-feature: '' (entry 2) is not N or MIN-MAX" -- train --ids-per-feature 1,,2
expect 2 "--ids-per-feature: '3-1' (entry 1); give" -- train --ids-per-feature 3-1,2
expect 2 "--ids-per-feature: '0' (entry 2); give" -- train --ids-per-feature 1,0
expect 2 "--ids-per-feature: 2 entries for 26 features" -- gen --out "$tmp/x.tsv" \
    --ids-per-feature 1,2
expect 2 "1 id per feature, not \[2, 2\] (feature 1)" -- gen --out "$tmp/x.tsv" \
    --table-rows 10,20 --ids-per-feature 1,2
# --workload: an unknown name lists the valid ones; the preset is applied
# first, so any other flag wins wherever it stands
expect 2 "--workload: 'X' is not a workload; choose K, M or D" -- train --workload X
expect 2 "--workload needs a value" -- train --workload
for order in "--batch-size 64 --workload K" "--workload=K --batch-size 64"; do
    expect 0 "workload K, 26 tables (33762577 rows.*, dot, batch 64, 2 steps, optimizer sgd" -- \
        train $order --steps 2 --eval-samples 64 --no-progress
    grep -q "global batch 64," "$tmp/err" || { echo "FAIL: $order: summary lacks batch 64"; fail=1; }
done
# bench comm: help, every documented flag known, bad values name the flag
expect 0 "bench" -- --help
expect 0 "comm" -- bench --help
expect 0 "--max-bytes" -- bench comm --help
for flag in $("$bin" bench comm --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    # the trailing bad --iters stops the run right after the flag was parsed
    "$bin" bench comm "$flag" x --iters 0 2>"$tmp/err" >/dev/null
    if grep -q "unknown flag" "$tmp/err"; then echo "FAIL: documented flag $flag is unknown"; fail=1; fi
done
expect 2 "which benchmark" -- bench
expect 2 "unknown benchmark 'foo'" -- bench foo
expect 2 "unknown flag --bogus" -- bench comm --bogus 1
expect 2 "--iters" -- bench comm --iters 0
expect 2 "--iters needs a value" -- bench comm --iters
expect 2 "--max-bytes: '8G' is out of range" -- bench comm --max-bytes 8G
expect 2 "--min-bytes 2097152 is above --max-bytes 1048576" -- bench comm --min-bytes 2M --max-bytes 1M
expect 2 "--device: 'gpu'" -- bench comm --device gpu
expect 2 "--comm: 'gloo'" -- bench comm --comm gloo
expect 2 "--out" -- bench comm --out /nonexistent/dir/links.json

# a wrapped message keeps its cause (it printed only " (entry 2)")
expect 2 "--table-rows: 0 is out of range .* (entry 2)" -- train --table-rows 100,0,100
# sizes that cannot fit: refused before allocating, naming table or flag, bytes and memory
expect 2 "bytes.*this machine has: table 't0' (1099511627776 rows x 16" -- train --steps 1 \
    --table-rows 1099511627776
expect 2 "evaluation buffers (--eval-samples 68719476736)" -- train --steps 1 \
    --eval-samples 68719476736
expect 2 "batch buffers (--batch-size 16777216" -- train --steps 1 --batch-size 16777216 \
    --ids-per-feature 1048576
# strict --config: unknown keys (nested too) with the nearest key, types, whole numbers
printf '{"steps": 1, "batch_sise": 64}' >"$tmp/c1.json"
expect 2 'key "batch_sise": unknown key; HINT: did you mean "batch_size"' -- train --config "$tmp/c1.json"
printf '{"tables": [{"name": "a", "rowz": 10}]}' >"$tmp/c2.json"
expect 2 'tables\[0\]: key "rowz": unknown key; HINT: did you mean "rows"' -- train --config "$tmp/c2.json"
printf '{"batch_size": 2.5}' >"$tmp/c3.json"
expect 2 'key "batch_size": expected an integer, got 2.5' -- train --config "$tmp/c3.json"
printf '{"optimizer": 1}' >"$tmp/c4.json"
expect 2 'key "optimizer": expected a string' -- train --config "$tmp/c4.json"
printf '{"tables": [{"name": "a", "rows": 1e15}]}' >"$tmp/c5.json"
expect 2 'key "rows": 1000000000000000 is out of range' -- train --config "$tmp/c5.json"
# plan integers that do not fit are errors, not wrapped to rank 0
printf '{"tables": [{"name": "t0", "sharding": "tw", "shards": [{"rank": 4294967296}]}]}' \
    >"$tmp/p1.json"
expect 2 '"rank" is 4294967296' -- train --steps 1 --table-rows 10 --plan "$tmp/p1.json"
expect 2 "cannot read config file (Is a directory)" -- train --config "$tmp"
# --eval-data without --data was ignored (exit 0, synthetic evaluation)
expect 2 "--eval-data needs --data" -- train --steps 1 --eval-data "$tmp/none.tsv"
# strict plan keys: a misspelt key is named with the nearest known one
printf '{"tables": [{"name": "t0", "sharding": "rw", "shard": [{"rank": 0}]}]}' >"$tmp/p2.json"
expect 2 "table 't0': key \"shard\" is unknown; HINT: did you mean \"shards\"?" -- \
    train --steps 1 --table-rows 10 --plan "$tmp/p2.json"
# --loader-threads: a range, reported in the summary, and the same batches on any count
expect 2 "--loader-threads" -- train --loader-threads -1
expect 2 "--loader-threads" -- train --loader-threads 5000
for n in 1 3; do
    OMP_NUM_THREADS=1 "$bin" train --steps 20 --eval-samples 0 --no-progress --loader-threads $n \
        --metrics "$tmp/lt$n.jsonl" 2>"$tmp/lt$n.err" || { cat "$tmp/lt$n.err"; fail=1; }
    grep -q "makes batches on $n OpenMP thread\|this build has no OpenMP" "$tmp/lt$n.err" ||
        { echo "FAIL: the summary does not report $n loader threads"; fail=1; }
done
grep -o '"loss": *[0-9.e+-]*' "$tmp/lt1.jsonl" >"$tmp/lt1.loss"
grep -o '"loss": *[0-9.e+-]*' "$tmp/lt3.jsonl" >"$tmp/lt3.loss"
if [ ! -s "$tmp/lt1.loss" ] || ! cmp -s "$tmp/lt1.loss" "$tmp/lt3.loss"; then
    echo "FAIL: losses differ between 1 and 3 loader threads"; fail=1
fi

# ---- issue 19, item 5: messages, warnings and exit statuses -------------------------------
tiny="--embedding-dim 8 --bot-mlp 13-8 --top-mlp 8-1 --table-rows 50,50 --batch-size 32 --no-progress"
# a switch given a value: a clear message, not "unknown flag"
expect 2 "--cuda-graphs is a switch and takes no value" -- train --cuda-graphs=1
expect 2 "--progress is a switch and takes no value" -- train --progress=0
expect 2 "--skip-bad-lines is a switch and takes no value" -- train --skip-bad-lines=yes
# empty output and input paths are errors, never "none"
expect 2 "--metrics: an empty path" -- train --steps 1 --metrics ''
expect 2 "--trace: an empty path" -- train --steps 1 --trace ''
expect 2 "--plan: an empty path" -- train --steps 1 --plan ''
expect 2 "--init-weights: an empty path" -- train --steps 1 --init-weights ''
expect 2 "--save-weights: an empty path" -- train --steps 1 --save-weights ''
# a config key with no near known key lists them, never an unrelated one ("trace" -> "lr")
printf '{"trace": "t.json"}' >"$tmp/c6.json"
expect 2 'key "trace": unknown key; HINT: the known keys are steps, batch_size' -- train --config "$tmp/c6.json"
grep -q "did you mean" "$tmp/err" && { echo "FAIL: an unrelated key was suggested"; cat "$tmp/err"; fail=1; }
# the plan reader: wrong types named, no trailing text, no NUL in a name
printf '{"tables": [{"name": "t0", "sharding": 5}]}' >"$tmp/p3.json"
expect 2 "table 't0': \"sharding\" is a number; it must be a string" -- \
    train --steps 1 --table-rows 10 --plan "$tmp/p3.json"
printf '{"tables": [{"name": "t0", "sharding": "dp"}]} trailing' >"$tmp/p4.json"
expect 2 "text after the JSON object" -- train --steps 1 --table-rows 10 --plan "$tmp/p4.json"
printf '{"tables": [{"name": "t0\\u0000x", "sharding": "dp"}]}' >"$tmp/p5.json"
expect 2 "\\\\u0000" -- train --steps 1 --table-rows 10 --plan "$tmp/p5.json"
# --batch-pool that cannot fit: refused at start-up naming it (it used to abort)
expect 2 "the batch pool (--batch-pool 65536 batches of --batch-size 65536)" -- \
    train --steps 1 --batch-pool 65536 --batch-size 65536
# warnings: settings that do nothing or oversubscribe
expect 0 "warning: --trace-steps without --trace records nothing" -- train $tiny --steps 2 --trace-steps 1:2
expect 0 "warning: --trace-steps 2:9 ends after the last step: the trace records steps 2:3" -- \
    train $tiny --steps 3 --trace "$tmp/t1.json" --trace-steps 2:9
expect 0 "warning: --trace-steps 5:9 starts after the last step (--steps 3)" -- \
    train $tiny --steps 3 --trace "$tmp/t2.json" --trace-steps 5:9
expect 0 "trace: $tmp/t2.json, no step, 0 spans" -- \
    train $tiny --steps 3 --trace "$tmp/t2.json" --trace-steps 5:9
expect 0 "warning: --loader-threads 1024 is more than the" -- train $tiny --steps 2 --loader-threads 1024
"$bin" gen --out "$tmp/g.tsv" --samples 200 --table-rows 50,50 >/dev/null 2>&1 || { echo "FAIL: gen"; fail=1; }
: >"$tmp/empty.tsv"
expect 0 "warning: --eval-data $tmp/empty.tsv holds no samples" -- \
    train $tiny --steps 2 --data "$tmp/g.tsv" --eval-data "$tmp/empty.tsv"
exit $fail
