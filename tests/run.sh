#!/bin/sh
# Runs every test binary under $BUILD/tests (cmocka suites) and every script
# tests/check_*.sh (end-to-end checks of the command-line tool, multi-rank runs),
# then prints one line: "N passed, N failed". Exit status 0 only if none failed.
# TEST_FILTER=substring runs only matching tests.
BUILD=${BUILD:-build}
passed=0
failed=0
failed_names=""
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

for bin in "$root/$BUILD"/tests/test_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    case "$name" in *"${TEST_FILTER:-}"*) ;; *) continue ;; esac
    out=$("$bin" 2>&1)
    rc=$?
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1 # crashed or exited badly without reporting
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        failed_names="$failed_names $name"
        printf '%s\n' "$out"
    fi
    printf '%-40s %3d passed %3d failed\n' "$name" "$p" "$f"
done

for script in "$here"/check_*.sh; do
    [ -f "$script" ] || continue
    name=$(basename "$script" .sh)
    case "$name" in *"${TEST_FILTER:-}"*) ;; *) continue ;; esac
    out=$(BUILD="$BUILD" sh "$script" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        printf '%-40s   1 passed   0 failed\n' "$name"
    else
        failed=$((failed + 1))
        failed_names="$failed_names $name"
        printf '%s\n' "$out" | tail -40
        printf '%-40s   0 passed   1 failed\n' "$name"
    fi
done

[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
