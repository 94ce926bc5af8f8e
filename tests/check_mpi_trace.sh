#!/bin/sh
# --trace across ranks: the merged Chrome trace of `shardrec train` on 1 rank
# (no mpirun), 2 ranks, and 3 ranks whose trace clocks are skewed by the
# test-only environment variable SR_TRACE_TEST_SKEW_NS (rank 1 +7.5 s, rank 2
# -3 s). For each run it checks that:
#   - the file parses as JSON, with one process per rank ("rank R"), tracks
#     "compute" (and "comm sparse", "comm dense", "comm input" on several
#     ranks: the input dist's collectives on 'input', the output and
#     gradient dists' on 'sparse'), and every
#     stage span (step, load, embedding.forward, bottom_mlp, interaction,
#     top_mlp, backward, embedding.backward, optimizer) on every rank in every
#     step of --trace-steps, and only those steps;
#   - stage spans nest on the compute track (a child lies inside its parent);
#   - collective spans carry bytes, peers and crossed_node;
#   - the pipeline (--pipeline sparse-dist, the default): the load spans are on
#     the "loader" track, and on several ranks the compute thread issues the
#     input_dist counts and data exchanges of step i+1 inside step i's span,
#     before its optimizer (thread order; the collectives' overlap in time is
#     up to the scheduler and only reported);
#   - alignment: the offsets reported for the skewed ranks equal the skew
#     within their stated uncertainty plus 1 ms, and the k-th collective of a
#     communicator in a step, which every rank runs together, lines up across
#     ranks: on the merged time line each rank's span ends after every rank's
#     span of it has started (less TOL), for all but a tenth of them (an
#     exchange whose counts to and from a peer are all zero may end before
#     that peer enters it; any other cannot, whatever the scheduler does). TOL = 3 ms plus twice the largest uncertainty, against
#     skews of seconds. The median spread of the ends is printed, not
#     asserted: on an oversubscribed 2-core machine (3 ranks) it is one time
#     slice of whichever rank the scheduler left waiting.
# A fourth run (2 ranks) traces every step: the summary's exposed communication
# per step must equal the comm.wait spans of rank 0's compute track per step.
# Also: the summary states the span cost and its share of a step. Exit 0 pass,
# 77 skipped (no MPI), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_mpi
sr_need_python3
sr_need_built "$bin"
unset SR_TRACE_TEST_SKEW_NS
sr_timeout=180
fail=0
JOB="--steps 9 --batch-size 128 --eval-samples 0 --table-rows 1000,20000,300,5000 --log-every 100"

# rank R's skew from SKEW_R (unset: none), then the binary.
cat >"$tmp/skewed.sh" <<'EOF'
#!/bin/sh
eval "skew=\${SKEW_${OMPI_COMM_WORLD_RANK:-0}:-}"
[ -n "$skew" ] && export SR_TRACE_TEST_SKEW_NS="$skew"
exec "$@"
EOF
chmod +x "$tmp/skewed.sh"

# check NAME RANKS SKEW_1 SKEW_2: read $tmp/NAME.json and $tmp/NAME.err.
check() {
    python3 - "$tmp/$1.json" "$tmp/$1.err" "$2" "${3:-0}" "${4:-0}" <<'EOF' || fail=1
import json, os, statistics, sys
path, err, W, skews = sys.argv[1], sys.argv[2], int(sys.argv[3]), [0] + [int(s) for s in sys.argv[4:]]
bad = []
d = json.load(open(path))
ev = d["traceEvents"]
other = d["otherData"]
first, last = (int(x) for x in other["steps"].split(":"))
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
if procs != {r: "rank %d" % r for r in range(W)}:
    bad.append("processes %s" % procs)
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
          if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [e for e in ev if e["ph"] == "X"]
want_tracks = ["compute", "loader"] + (["comm sparse", "comm dense", "comm input"] if W > 1 else [])
stages = ["step", "load", "copy", "embedding.forward", "lookup", "bottom_mlp", "interaction",
          "top_mlp", "backward", "embedding.backward", "optimizer", "allreduce.bucket.0"]
if W > 1:
    stages += ["input_dist.counts", "input_dist.data", "output_dist", "emb_grad_dist"]
for r in range(W):
    names = set(tracks[k] for k in tracks if k[0] == r)
    for t in want_tracks:
        if t not in names:
            bad.append("rank %d has no track %r (has %s)" % (r, t, sorted(names)))
    compute = [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == "compute"]
    loader = [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == "loader"]
    for step in range(first, last + 1):
        got = set(e["name"] for e in compute + loader if e["args"]["step"] == step)
        miss = [s for s in stages if s not in got]
        if miss:
            bad.append("rank %d step %d lacks %s" % (r, step, miss))
    outside = [e for e in spans if e["pid"] == r and not first <= e["args"]["step"] <= last]
    if outside:
        bad.append("rank %d: %d spans outside steps %d:%d" % (r, len(outside), first, last))
    # nesting on the compute track: sorted by start, each span ends inside the open ones
    stack = []
    for e in sorted(compute, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        while stack and stack[-1] <= t0 + 1e-9:
            stack.pop()
        if stack and t1 > stack[-1] + 1e-6:
            bad.append("rank %d: %s at %.3f us crosses its parent's end" % (r, e["name"], t0))
            break
        stack.append(t1)
busy = [e for e in spans if e["cat"] == "comm.busy"]
# the pipeline: batch i+1's input dist is issued during step i. The compute
# thread starts batch i+1's counts and data exchanges inside step i's span,
# before step i's optimizer: thread order, the same on every run.
def issued(r, name, step):
    got = [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == "compute"
           and e["cat"] == "stage" and e["name"] == name and e["args"]["step"] == step]
    return min((float(e["ts"]) for e in got), default=None)
def stage_of(r, name, step):
    return [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == "compute"
            and e["name"] == name and e["args"]["step"] == step]
ahead_issues = 0
for r in range(W if W > 1 else 0):
    for step in range(first, last):
        body, opt = stage_of(r, "step", step), stage_of(r, "optimizer", step)
        if not body or not opt:
            continue  # reported above as a missing stage
        b0, b1 = float(body[0]["ts"]), float(body[0]["ts"]) + float(body[0]["dur"])
        o0 = min(float(e["ts"]) for e in opt)
        for name in ("input_dist.counts", "input_dist.data"):
            t = issued(r, name, step + 1)
            if t is None or not b0 <= t < o0:
                bad.append("rank %d: %s of step %d issued at %s, not inside step %d "
                           "before its optimizer (%.1f..%.1f us)" % (r, name, step + 1, t, step, b0, o0))
            else:
                ahead_issues += 1
# How much the collectives then overlap step i's compute in time is up to
# the scheduler (2 cores, several threads a rank): reported, not checked.
# On the deferred CPU devices the compute thread only issues ops and a comm
# worker runs the stream up to its collective's event itself (comm.h,
# sr_comm_bind_device); check_mpi_device_trace times the device side there.
dense_stages = {"lookup", "bottom_mlp", "interaction", "top_mlp", "backward", "optimizer",
                "output_dist", "emb_grad_dist", "embedding.forward", "embedding.backward"}
overlaps = 0
for r in range(W if W > 1 else 0):
    comp = [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == "compute"
            and e["name"] in dense_stages]
    ahead = [e for e in busy if e["pid"] == r and e["name"].startswith("input_dist.")]
    for a in ahead:
        a0, a1 = float(a["ts"]), float(a["ts"]) + float(a["dur"])
        if any(c["args"]["step"] == a["args"]["step"] - 1 and float(c["ts"]) < a1 and
               a0 < float(c["ts"]) + float(c["dur"]) for c in comp):
            overlaps += 1
if W > 1:
    print("  %d input_dist exchanges of step i+1 issued inside step i; %d of their collectives "
          "overlapped a compute span of step i in time" % (ahead_issues, overlaps))
    if ahead_issues == 0:
        bad.append("no input_dist exchange of step i+1 was issued inside step i")
# the input dist has its own communicator: a later batch's counts and ids
# never queue behind this batch's output dist on 'sparse'
for e in busy:
    want = "input" if e["name"].startswith("input_dist.") else None
    if e["name"] in ("output_dist", "emb_grad_dist"):
        want = "sparse"
    if want and e["args"].get("comm") != want:
        bad.append("%s ran on communicator %s, not %s" % (e["name"], e["args"].get("comm"), want))
        break
for e in busy:
    for k in ("bytes", "peers", "crossed_node", "coll", "comm"):
        if k not in e["args"]:
            bad.append("collective span %s lacks %s" % (e["name"], k))
            break
if W > 1 and not busy:
    bad.append("no collective spans")
off, unc = other["clock_offset_ns"], other["clock_uncertainty_ns"]
for r in range(1, W):
    if abs(off[r] - skews[r]) > unc[r] + 1e6:
        bad.append("rank %d offset %d ns, skew %d ns, uncertainty %d ns" % (r, off[r], skews[r], unc[r]))
tol_us = 3000 + 2 * max(unc) / 1000
# Line-up of clocks: the k-th collective of a step on each communicator is
# one collective on every rank. Not on 'input': its collectives run a batch
# ahead, labelled with the step their issuing thread was in, which differs
# across ranks, so their order within a label does not pair them up.
groups = {}
for e in busy:
    if e["args"]["comm"] == "input":
        continue
    key = (e["args"]["comm"], e["args"]["step"])
    groups.setdefault(key, {}).setdefault(e["pid"], []).append(e)
spreads, late = [], 0
for key, by_rank in groups.items():
    if len(by_rank) != W or len(set(len(v) for v in by_rank.values())) != 1:
        bad.append("collectives of %s differ in number across ranks" % (key,))
        continue
    for k in range(len(by_rank[0])):
        col = [sorted(by_rank[r], key=lambda e: float(e["ts"]))[k] for r in range(W)]
        starts = [float(e["ts"]) for e in col]
        ends = [float(e["ts"]) + float(e["dur"]) for e in col]
        spreads.append(max(ends) - min(ends))
        if min(ends) < max(starts) - tol_us:
            late += 1
if spreads:
    med = statistics.median(spreads)
    print("  %d collectives matched across %d ranks: median spread of their ends %.1f us, "
          "%d ending before a peer started (tolerance %.0f us)" % (len(spreads), W, med, late, tol_us))
    if late > len(spreads) // 10:
        bad.append("collectives do not line up: %d of %d end on one rank before a peer started them "
                   "(median spread of the ends %.1f us)" % (late, len(spreads), med))
text = open(err).read()
# exposed communication: the summary's figure (rank 0, per training step) is
# the comm.wait spans of rank 0's compute track, when the trace holds every step
import re
m = re.search(r"communication per step: busy ([0-9.]+) ms, overlapped ([0-9.]+) ms, exposed ([0-9.]+) ms", text)
if not m:
    bad.append("the summary has no 'communication per step' line")
elif first == 1:  # the window starts at step 1 and ends at the run's last step (JOB)
    waits = [float(e["dur"]) for e in spans if e["pid"] == 0 and e["name"] == "comm.wait"
             and tracks[(0, e["tid"])] == "compute"]
    per_step = sum(waits) / 1000.0 / last
    summ = float(m.group(3))
    print("  exposed communication per step: trace %.3f ms (%d comm.wait spans), summary %.2f ms"
          % (per_step, len(waits), summ))
    if abs(per_step - summ) > 0.006 + 0.02 * summ:
        bad.append("exposed per step: trace %.3f ms, summary %.2f ms" % (per_step, summ))
    if W > 1 and not waits:
        bad.append("no comm.wait spans on rank 0")
if "one span costs" not in text or "tracing adds" not in text:
    bad.append("the summary does not state the span cost")
for line in text.splitlines():
    if line.startswith("trace:"):
        print("  " + line)
for b in bad[:10]:
    print("  FAIL: " + b)
sys.exit(1 if bad else 0)
EOF
}

run() { # NAME NP [SKEW_1 [SKEW_2]]
    name=$1 np=$2
    if [ "$np" = 1 ]; then
        timeout 120 "$bin" train $JOB --trace "$tmp/$name.json" --trace-steps ${STEPS_TRACED:-2:5} \
            >"$tmp/$name.out" 2>"$tmp/$name.err"
    else
        SKEW_1=${3:-} SKEW_2=${4:-} sr_mpirun "$np" -x SKEW_1 -x SKEW_2 \
            "$tmp/skewed.sh" "$bin" train $JOB --trace "$tmp/$name.json" --trace-steps ${STEPS_TRACED:-2:5} \
            >"$tmp/$name.out" 2>"$tmp/$name.err"
    fi
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL $name: exit $rc"
        tail -5 "$tmp/$name.err"
        fail=1
        return
    fi
    echo "$name:"
    check "$name" "$np" "${3:-0}" "${4:-0}"
}

run np1 1
run np2 2
run np3-skewed 3 7500000000 -3000000000
STEPS_TRACED=1:9 run np2-every-step 2
[ $fail = 0 ] && echo "check_mpi_trace: passed"
exit $fail
