# Shared by the checkpoint fault tests (check_checkpoint_faults.sh,
# check_checkpoint_overlap.sh), sourced after lib.sh: the job, the case
# counters, the metrics a resume must match, and a launch on 0 (one
# process, no mpirun) or NP ranks. Sets pass, fail and have_mpi.
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --global-batch-size 48 --optimizer adam --lr 0.01
     --emb-optimizer adagrad --eval-samples 200 --eval-every 4 --log-every 1 --no-progress"
pass=0 fail=0
have_mpi=1
command -v mpirun >/dev/null 2>&1 || have_mpi=0

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
fields() { grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$1"; }
# the metrics from step $2 on
fields_from() { fields "$1" | awk -v k="$2" '/"step"/ { s = $2 } s >= k'; }

launch() { # NP ARGS...
    np=$1
    shift
    if [ "$np" -eq 0 ]; then timeout -s KILL "$sr_timeout" "$bin" train $JOB "$@"; else
        sr_mpirun "$np" "$bin" train $JOB "$@"; fi
}
