#!/bin/sh
# Runs the test suite and reports every test case, one line each:
#
#   ok       test_kjt.test_offsets          a cmocka case that passed
#   FAILED   test_kjt.test_lengths          a case that failed, crashed or gave no result
#   SKIPPED  test_synthetic.test_threads    a case that called skip()
#   MISSING  test_foo                       tests/test_foo.c has no binary in $BUILD/tests
#   ok       check_cli                      a script tests/check_*.sh that exited 0
#
# and ends with one line "N passed, N failed, N skipped". A skipped case is never
# counted as passed, and a missing binary counts as failed.
#
# What runs:
#   - every cmocka suite $BUILD/tests/test_X built from tests/test_X.c: each case
#     is read from cmocka's "[ RUN      ]" / "[       OK ]" / "[  FAILED  ]" /
#     "[  SKIPPED ]" / "[  ERROR   ]" lines. A case that started and reported no
#     result, a non-zero exit status after all cases passed (a sanitizer report
#     at exit), or a suite that reports no case at all, each count as one failure;
#   - every MPI test program tests/mpi/mpi_X.c must exist as $BUILD/tests/mpi_X
#     when the build has MPI (the tests/check_mpi_*.sh scripts run them);
#     without MPI in the build they are reported as skipped;
#   - every script tests/check_X.sh, as one case: exit 0 passed, exit 77 skipped
#     (it could not run its check: a prerequisite such as mpirun or PyTorch is
#     missing; its last output line says why), anything else failed.
#
# Exit status 0 only if none failed. TEST_STRICT=1 (CI, where every
# prerequisite is installed) also fails the run when any case was skipped.
# TEST_FILTER=substring runs only the suites, programs and scripts whose name
# contains it.
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
. "$here/blas_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
skipped=0
failed_names=""
skipped_names=""

selected() {
    case "$1" in *"${TEST_FILTER:-}"*) return 0 ;; esac
    return 1
}

# report STATUS NAME [DETAIL]: one line, and the counts.
report() {
    case "$1" in
    ok) passed=$((passed + 1)) ;;
    SKIPPED) skipped=$((skipped + 1)) skipped_names="$skipped_names $2" ;;
    *) failed=$((failed + 1)) failed_names="$failed_names $2" ;;
    esac
    if [ -n "${3:-}" ]; then
        printf '%-8s %s (%s)\n' "$1" "$2" "$3"
    else
        printf '%-8s %s\n' "$1" "$2"
    fi
}

# cmocka's per-case lines of output file $1 -> "STATUS NAME", in run order.
cmocka_cases() {
    awk '
    function name() { return substr($0, 14) }
    /^\[ RUN      \] / { n = name(); if (!(n in run)) { run[n] = 1; order[++k] = n } next }
    /^\[       OK \] / { ok[name()] = 1; next }
    /^\[  FAILED  \] / { bad[name()] = 1; next }
    /^\[  ERROR   \] / { bad[name()] = 1; next }
    /^\[  SKIPPED \] / { skip[name()] = 1; next }
    END {
        for (i = 1; i <= k; i++) {
            n = order[i]
            if (n in bad) s = "FAILED"
            else if (n in skip) s = "SKIPPED"
            else if (n in ok) s = "ok"
            else s = "NORESULT"
            print s, n
        }
    }' "$1"
}

run_suite() { # name binary
    "$2" >"$tmp/out" 2>&1
    rc=$?
    cmocka_cases "$tmp/out" >"$tmp/cases"
    suite_failed=$failed
    ncases=0
    while read -r status case_name; do
        ncases=$((ncases + 1))
        if [ "$status" = NORESULT ]; then
            report FAILED "$1.$case_name" "started, no result: crashed?"
        else
            report "$status" "$1.$case_name"
        fi
    done <"$tmp/cases"
    if [ "$ncases" -eq 0 ]; then
        report FAILED "$1" "no test case reported, exit status $rc"
    elif [ "$rc" -ne 0 ] && [ "$failed" -eq "$suite_failed" ]; then
        report FAILED "$1" "exit status $rc after its cases"
    fi
    [ "$failed" -eq "$suite_failed" ] || sed 's/^/    | /' "$tmp/out"
}

# 1. cmocka suites, one per tests/test_*.c
for src in "$here"/test_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c)
    selected "$name" || continue
    bin="$root/$BUILD/tests/$name"
    if [ -x "$bin" ]; then
        run_suite "$name" "$bin"
    else
        report MISSING "$name" "no $BUILD/tests/$name; build it with: make BUILD=$BUILD tests"
    fi
done

# 2. MPI test programs: present when the build has MPI
build_has_mpi() {
    lib="$root/$BUILD/libshardrec.a"
    if command -v nm >/dev/null 2>&1 && [ -f "$lib" ]; then
        nm "$lib" 2>/dev/null | grep -q ' U MPI_Init'
    else
        command -v mpicc >/dev/null 2>&1
    fi
}
mpi_build=""
for src in "$here"/mpi/mpi_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c)
    selected "$name" || continue
    [ -n "$mpi_build" ] || { build_has_mpi && mpi_build=yes || mpi_build=no; }
    if [ "$mpi_build" = no ]; then
        report SKIPPED "$name" "$BUILD has no MPI"
    elif [ ! -x "$root/$BUILD/tests/$name" ]; then
        report MISSING "$name" "no $BUILD/tests/$name; build it with: make BUILD=$BUILD tests"
    fi
done

# 3. check scripts, one case each
for script in "$here"/check_*.sh; do
    [ -f "$script" ] || continue
    name=$(basename "$script" .sh)
    selected "$name" || continue
    t0=$(date +%s)
    BUILD="$BUILD" sh "$script" >"$tmp/out" 2>&1
    rc=$?
    took="$(($(date +%s) - t0)) s"
    case "$rc" in
    0) report ok "$name" "$took" ;;
    77) report SKIPPED "$name" "$(grep . "$tmp/out" | tail -1)" ;;
    *)
        tail -40 "$tmp/out" | sed 's/^/    | /'
        report FAILED "$name" "exit status $rc, $took"
        ;;
    esac
done

[ -n "$skipped_names" ] && echo "skipped:$skipped_names"
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] || exit 1
if [ "${TEST_STRICT:-0}" = 1 ] && [ "$skipped" -ne 0 ]; then
    echo "TEST_STRICT=1: skipped cases fail this run"
    exit 1
fi
exit 0
