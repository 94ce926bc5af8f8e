# The shell tests' shared preamble: source it first thing,
#
#   . "$(dirname "$0")/lib.sh"             (tests/check_*.sh)
#   . "$(dirname "$0")/../lib.sh"          (tests/gpu/*.sh)
#   . "$(dirname "$0")/../tests/lib.sh"    (tools/*.sh)
#
# It sets, for the script that sources it:
#
#   BUILD        the build folder, as given (default build)
#   sr_name      the script's name without .sh (check_mpi_comm), for messages
#   sr_root      the repository root, absolute
#   sr_tests     the tests/ folder, absolute
#   sr_build     $BUILD, absolute (relative paths are taken from the root)
#   sr_shardrec  $sr_build/shardrec
#   sr_as_root   --allow-run-as-root when running as root, else empty
#   tmp          a fresh folder, removed at exit (KEEP_TMP=1 keeps it and
#                names it); a script with more to undo at exit puts it in
#                sr_on_exit (a command, run first)
#
# and exports, so that ranks on an oversubscribed machine do not fight over
# cores (sr_threads=keep before sourcing leaves the caller's thread counts):
#
#   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
#   LSAN_OPTIONS     Open MPI's own leaks suppressed under ASan (BUILD=build-asan;
#                    the slow unwinder reaches the Open MPI frames named in
#                    tests/lsan_openmpi.supp)
#
# SR_RANKS_PER_NODE is unset: a test says the topology it wants.
#
# Functions:
#
#   sr_need_mpirun           exit 77 (skipped) when there is no mpirun
#   sr_need_mpi              exit 77 when there is no mpirun or no mpicc (the
#                            MPI test programs need an MPI build)
#   sr_need_python3          exit 77 when there is no python3
#   sr_need_torch            sets sr_python to a Python 3 with torch and numpy
#                            (TORCH_PYTHON first), or exits 77
#   sr_need_numpy            the same, for numpy alone
#   sr_need_built FILE...    exit 1 naming the file and the make command when
#                            one is not there
#   sr_mpirun NP ARGS...     the one way the tests launch ranks:
#       OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
#       timeout $sr_timeout_opts $sr_timeout \
#       mpirun [--allow-run-as-root] --oversubscribe --bind-to none \
#              [--mca btl $sr_btl] -np NP ARGS...
#     sr_timeout (seconds, default 300), sr_timeout_opts (timeout's options,
#     e.g. "-s KILL") and sr_btl (Open MPI's transports, e.g. tcp,self,vader;
#     default: Open MPI's choice) are the script's to set. ARGS may start with
#     more mpirun options (-x VAR, --mca ...) and may hold further app
#     contexts of an MPMD launch (... : -np 1 prog ...).
#   sr_mixed_plan W L        a plan (JSON, on stdout) for the 6-table test job
#                            that uses every sharding type, for W ranks in
#                            nodes of L
BUILD=${BUILD:-build}
sr_name=$(basename "$0" .sh)
sr_root=$(cd "$(dirname "$0")" && pwd)
while [ ! -f "$sr_root/tests/lib.sh" ]; do
    [ "$sr_root" != / ] || { echo "$sr_name: tests/lib.sh: cannot find the repository root"; exit 1; }
    sr_root=$(dirname "$sr_root")
done
sr_tests="$sr_root/tests"
case "$BUILD" in
/*) sr_build=$BUILD ;;
*) sr_build="$sr_root/$BUILD" ;;
esac
sr_shardrec="$sr_build/shardrec"
sr_as_root=""
[ "$(id -u)" -eq 0 ] && sr_as_root="--allow-run-as-root"

if [ "${sr_threads:-}" != keep ]; then
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
fi
. "$sr_tests/blas_env.sh"
export LSAN_OPTIONS="suppressions=$sr_tests/lsan_openmpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
unset SR_RANKS_PER_NODE

sr_on_exit=""
tmp=$(mktemp -d)
sr_exit() {
    [ -z "$sr_on_exit" ] || eval "$sr_on_exit"
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
[ -n "${KEEP_TMP:-}" ] && echo "tmp: $tmp"
trap sr_exit EXIT

sr_need_mpirun() {
    command -v mpirun >/dev/null 2>&1 && return 0
    echo "$sr_name: skipped (no mpirun)"
    exit 77
}

sr_need_mpi() {
    command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 && return 0
    echo "$sr_name: skipped (no MPI)"
    exit 77
}

sr_need_python3() {
    command -v python3 >/dev/null 2>&1 && return 0
    echo "$sr_name: skipped (no python3 to read the JSON)"
    exit 77
}

# sr_need_python MODULES HINT: sr_python, a Python 3 that imports MODULES
# ("torch, numpy"), TORCH_PYTHON first; else skipped (exit 77) with HINT.
sr_need_python() {
    for sr_python in ${TORCH_PYTHON:-} /usr/bin/python3 python3; do
        "$sr_python" -c "import $1" >/dev/null 2>&1 && return 0
    done
    echo "$sr_name: skipped: no Python 3 with $1; HINT: $2"
    exit 77
}
sr_need_torch() {
    sr_need_python "torch, numpy" \
        "apt-get install python3-torch (tools/install-deps.sh), or set TORCH_PYTHON"
}
sr_need_numpy() {
    sr_need_python numpy "apt-get install python3-numpy (tools/install-deps.sh installs \
python3-torch, which brings it), or set TORCH_PYTHON"
}

sr_need_built() {
    for f in "$@"; do
        [ -x "$f" ] && continue
        echo "$sr_name: FAIL: $f is missing; HINT: make BUILD=$BUILD all tests"
        exit 1
    done
}

sr_timeout=300
sr_timeout_opts=""
sr_btl=""
sr_mpirun() { # NP ARGS...
    sr_np=$1
    shift
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout $sr_timeout_opts "$sr_timeout" \
        mpirun $sr_as_root --oversubscribe --bind-to none ${sr_btl:+--mca btl "$sr_btl"} \
        -np "$sr_np" "$@"
}

sr_mixed_plan() { # W L
    sr_last=$(($1 - 1))
    cat <<JSON
{"world_size": $1, "local_size": $2, "tables": [
 {"name": "t0", "sharding": "dp"},
 {"name": "t1", "sharding": "tw", "rank": $sr_last},
 {"name": "t2", "sharding": "rw"},
 {"name": "t3", "sharding": "cw", "ranks": [$sr_last, 0]},
 {"name": "t4", "sharding": "twrw", "node": $(($1 / $2 - 1))},
 {"name": "t5", "sharding": "tw", "rank": 0}]}
JSON
}
