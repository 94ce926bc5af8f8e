#!/usr/bin/env bash
# Workload K (BENCH.md) on one process: this tree's shardrec against the one
# built from an earlier commit, in interleaved rounds, median and ratio.
# The speed check of a change to the step: "within 5% of the previous
# commit's (or faster)".
#
#   bench/k_vs_commit.sh BASE_COMMIT            # 5 rounds, 60 steps each
#   R=7 STEPS=80 bench/k_vs_commit.sh 0d54361
#
# BASE_COMMIT is checked out into a scratch worktree outside the repository and
# built there (make BUILD=build); this tree's binary is $SHARDREC (default
# build/shardrec: build it first). Rounds alternate the order (base, new; new,
# base; ...) so load from other jobs hits both alike. A run's figure is the
# mean `step_ms` of its --metrics lines after WARMUP steps: the end-to-end
# step including generating its batch. The table lists every run, the median
# per build, and new/base (below 1: the new build is faster).
#
# Environment: R (rounds, default 5), STEPS (60), WARMUP (10), SHARDREC,
# OMP_NUM_THREADS (default 2), OPENBLAS_NUM_THREADS (default 1), SR_EXTRA
# (flags appended to both command lines), OUTDIR (kept; default a new
# directory under ${TMPDIR:-/tmp}).
set -euo pipefail
die() { echo "k_vs_commit: $*" >&2; exit 2; }

[ $# -eq 1 ] || die "usage: $0 BASE_COMMIT"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
base=$(git -C "$repo" rev-parse --short "$1^{commit}" 2>/dev/null) || die "'$1' is not a commit of $repo"
R=${R:-5}
STEPS=${STEPS:-60}
WARMUP=${WARMUP:-10}
SHARDREC=${SHARDREC:-$repo/build/shardrec}
SR_EXTRA=${SR_EXTRA:-}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
[ "$STEPS" -gt "$WARMUP" ] || die "STEPS ($STEPS) must exceed WARMUP ($WARMUP)"
[ -x "$SHARDREC" ] || die "$SHARDREC not found: build it first (make -j2) or set SHARDREC"

OUTDIR=${OUTDIR:-$(mktemp -d "${TMPDIR:-/tmp}/k_vs_commit.XXXXXX")}
mkdir -p "$OUTDIR"
wt=$OUTDIR/base-$base
if [ ! -x "$wt/build/shardrec" ]; then
    echo "building $base in $wt ..." >&2
    git -C "$repo" worktree add -q --detach "$wt" "$base"
    make -C "$wt" -j2 BUILD=build all >"$OUTDIR/base-build.log" 2>&1 ||
        die "building $base failed: $OUTDIR/base-build.log"
fi
BASE_BIN=$wt/build/shardrec

rows=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
# shellcheck disable=SC2206
args=(train --table-rows $rows --embedding-dim 16 --bot-mlp 13-512-256-64-16
    --top-mlp 512-256-1 --optimizer sgd --emb-optimizer sgd --lr 0.1 --batch-size 2048
    --steps "$STEPS" --ids-per-feature 1 --id-dist uniform --eval-every 0 --log-every 1
    $SR_EXTRA)

run() { # NAME BINARY ROUND
    local met=$OUTDIR/$1.$3.jsonl
    rm -f "$met"
    "$2" "${args[@]}" --metrics "$met" >"$OUTDIR/$1.$3.log" 2>&1 ||
        die "$1 round $3 failed: $OUTDIR/$1.$3.log"
    python3 - "$met" "$WARMUP" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ms = [r["step_ms"] for r in rows if r.get("step", 0) > int(sys.argv[2]) and "step_ms" in r]
if not ms:
    sys.exit("no step_ms after warm-up in " + sys.argv[1])
print("%.3f" % (sum(ms) / len(ms)))
EOF
}

new_commit=$(git -C "$repo" rev-parse --short HEAD)
dirty=$(git -C "$repo" status --porcelain --untracked-files=no | head -1)
[ -z "$dirty" ] || new_commit="$new_commit+dirty"
echo "workload K, 1 process (OMP $OMP_NUM_THREADS, OpenBLAS $OPENBLAS_NUM_THREADS), batch 2048, $STEPS steps, mean step_ms after $WARMUP, $R rounds"
echo "base $base ($BASE_BIN) vs new $new_commit ($SHARDREC), $(date -u +%FT%TZ), $(nproc) cores"
printf '%-6s %10s %10s\n' round "base ms" "new ms"
b_all=() n_all=()
for r in $(seq 1 "$R"); do
    if [ $((r % 2)) = 1 ]; then
        b=$(run base "$BASE_BIN" "$r"); n=$(run new "$SHARDREC" "$r")
    else
        n=$(run new "$SHARDREC" "$r"); b=$(run base "$BASE_BIN" "$r")
    fi
    b_all+=("$b") n_all+=("$n")
    printf '%-6s %10s %10s\n' "$r" "$b" "$n"
done
python3 - "${b_all[*]}" "${n_all[*]}" <<'EOF'
import statistics, sys
b = [float(x) for x in sys.argv[1].split()]
n = [float(x) for x in sys.argv[2].split()]
mb, mn = statistics.median(b), statistics.median(n)
print("median %10.3f %10.3f   new/base %.3f (%+.1f%%)" % (mb, mn, mn / mb, 100 * (mn / mb - 1)))
EOF
echo "logs and metrics: $OUTDIR"
