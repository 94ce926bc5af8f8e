#!/bin/sh
# The command line: --help works and is complete, bad flags, inconsistent
# shapes and missing files give a one-line error and exit status 2.
BUILD=${BUILD:-build}
bin="$BUILD/shardrec"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

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
    "$bin" train "$flag" 2>"$tmp/err" >/dev/null
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
expect 2 "not built yet" -- train --trace t.json
expect 2 "--comm-dtype" -- train --comm-dtype int8
expect 2 "--dense-comm-dtype" -- train --dense-comm-dtype fp8
expect 2 "p_missing.json" -- train --steps 1 --plan p_missing.json
expect 2 "sharding" -- train --sharding zz
expect 2 "--metrics" -- train --steps 1 --metrics /nonexistent/dir/m.jsonl
expect 2 "unknown command" -- frobnicate
expect 2 "--out" -- gen --samples 10
expect 2 "multi-hot\|one id\|ids per feature" -- gen --out "$tmp/x.tsv" --ids-per-feature 2
exit $fail
