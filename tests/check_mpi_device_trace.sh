#!/bin/sh
# Device spans in --trace (src/train/device_spans.h): on a device whose ops
# run after their call returns (here the deferred CPU device, SR_CPU_DEFERRED=1,
# which runs a stream's ops only when something waits for them, as a GPU runs
# them later than the host issues them), the trace has, beside the host's
# "compute" track, a device track per stream ("device compute", "device
# copy", "device sparse", "device dense") that says when the device ran each
# stage. For 1 rank (the EBC in local mode) and 2 ranks (the sharded
# EBC: input dist, output dist, gradient dist), with --pipeline sparse-dist
# and none, it checks on every rank that:
#   - every host stage span of the window's steps has exactly one device span
#     of the same name and step, on the track of the stream the stage runs
#     on: "device copy" for the batches' copies, "device sparse" for the
#     embedding exchanges (2 ranks), "device dense" for the gradient buckets,
#     "device compute" for the rest; host-only stages (load, data.wait,
#     comm.wait) have none;
#   - no device span starts before its host span started (the device cannot
#     run what the host has not issued yet), within 50 us plus twice the
#     clock anchor's uncertainty that the summary reports (an anchor 1 ms off
#     fails this);
#   - device spans nest on "device compute" (one stream runs in order), and
#     step i+1's device step starts after step i's ends;
#   - the summary's stage table has a device column;
# and that on the immediate CPU device (the ops run inside their calls, so the
# host spans are the device's) the trace has no device track and the summary
# no device column. One case records a window over a second into the run,
# where the clock is anchored again. The 2-rank cases skip without MPI.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_python3
sr_need_built "$bin"
unset SR_TRACE_TEST_SKEW_NS
fail=0
JOB="--steps 8 --batch-size 128 --eval-samples 0 --table-rows 1000,20000,300,5000 --log-every 100
     --trace-steps 3:6"

# check NAME RANKS PIPELINE DEVICE(1: device tracks expected)
check() {
    python3 - "$tmp/$1.json" "$tmp/$1.out" "$2" "$3" "$4" <<'EOF' || fail=1
import json, sys
from collections import Counter, defaultdict
path, out, W, pipe, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
bad = []
d = json.load(open(path))
ev = d["traceEvents"]
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
          if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [e for e in ev if e["ph"] == "X"]
summary = open(out).read()
import re
anchor = re.search(r"clock anchor \+- ([0-9.]+) us", summary)
if want and not anchor:
    bad.append("the summary does not report the device spans' clock anchor")
tol = 50 + 2 * float(anchor.group(1)) if anchor else 50
has_column = any(l.split()[-1:] == ["device"] for l in summary.splitlines()
                 if l.strip().startswith("stage "))
HOST_ONLY = {"load", "data.wait", "comm.wait"}
piped = pipe == "sparse-dist"
def on(r, name):
    return [e for e in spans if e["pid"] == r and tracks[(r, e["tid"])] == name]
n_dev = 0
for r in range(W):
    names = set(tracks[k] for k in tracks if k[0] == r)
    dev_tracks = sorted(n for n in names if n.startswith("device"))
    if not want:
        if dev_tracks:
            bad.append("rank %d: device tracks %s on the immediate CPU device" % (r, dev_tracks))
        continue
    host = [e for e in on(r, "compute") if e["name"] not in HOST_ONLY]
    SPARSE = ("input_dist.counts", "input_dist.data", "output_dist", "emb_grad_dist")
    def lane(e):
        n = e["name"]
        if n == "copy":
            return "device copy"
        if n.startswith("allreduce.bucket"):
            return "device dense"
        if W > 1 and n in SPARSE:
            return "device sparse"
        return "device compute"
    LANES = ("device compute", "device copy", "device sparse", "device dense")
    key = lambda e: (e["name"], e["args"]["step"])
    dev = {l: on(r, l) for l in LANES}
    dcomp = dev["device compute"]
    n_dev += sum(len(v) for v in dev.values())
    for l in LANES:
        want_l = Counter(key(e) for e in host if lane(e) == l)
        got_l = Counter(map(key, dev[l]))
        if got_l != want_l:
            bad.append("rank %d: %s spans: extra %s, missing %s" %
                       (r, l, sorted((got_l - want_l).items())[:5],
                        sorted((want_l - got_l).items())[:5]))
    # causality: the k-th device span of (name, step) starts after the k-th host one
    hosts = defaultdict(list)
    for e in sorted(host, key=lambda e: float(e["ts"])):
        hosts[key(e)].append(float(e["ts"]))
    seen = Counter()
    for e in sorted(sum(dev.values(), []), key=lambda e: float(e["ts"])):
        k = key(e)
        i = seen[k]
        seen[k] += 1
        if i < len(hosts[k]) and float(e["ts"]) < hosts[k][i] - tol:
            bad.append("rank %d: device %s of step %d starts %.1f us before the host issued it" %
                       (r, k[0], k[1], hosts[k][i] - float(e["ts"])))
    # one stream: device spans nest, steps follow each other
    stack = []
    for e in sorted(dcomp, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        while stack and stack[-1] <= t0 + 1e-6:
            stack.pop()
        if stack and t1 > stack[-1] + 1e-3:
            bad.append("rank %d: device %s at %.3f us crosses its parent's end" % (r, e["name"], t0))
            break
        stack.append(t1)
    steps = sorted((e for e in dcomp if e["name"] == "step"), key=lambda e: e["args"]["step"])
    for a, b in zip(steps, steps[1:]):
        if float(b["ts"]) < float(a["ts"]) + float(a["dur"]) - 1e-3:
            bad.append("rank %d: device step %d starts before step %d ends" %
                       (r, b["args"]["step"], a["args"]["step"]))
    if not steps:
        bad.append("rank %d: no device step spans" % r)
if want != has_column:
    bad.append("the summary's stage table %s a device column" % ("lacks" if want else "has"))
tag = "%d rank%s, %s, %s" % (W, "s" if W > 1 else "", pipe, "device spans" if want else "immediate")
if bad:
    print("FAIL %s:" % tag)
    for b in bad[:12]:
        print("   ", b)
    sys.exit(1)
print("ok   %s: %d device spans" % (tag, n_dev) if want else "ok   %s: no device tracks" % tag)
EOF
}

# run NAME RANKS PIPELINE DEFERRED [ARGS...]
run() {
    name=$1 np=$2 pipe=$3 deferred=$4
    shift 4
    if [ "$np" -gt 1 ]; then
        launch="sr_mpirun $np -x SR_CPU_DEFERRED"
    else
        launch=""
    fi
    if ! SR_CPU_DEFERRED=$deferred $launch "$bin" train $JOB --pipeline "$pipe" \
        --trace "$tmp/$name.json" "$@" >"$tmp/$name.out" 2>&1; then
        echo "FAIL $name: shardrec train failed"
        tail -20 "$tmp/$name.out"
        fail=1
        return
    fi
    [ "$deferred" = 1 ] && want=1 || want=0
    check "$name" "$np" "$pipe" "$want"
}

run one_piped 1 sparse-dist 1
run one_none 1 none 1
run one_immediate 1 sparse-dist 0
# a window over a second into the run: the clock is anchored again
run one_late 1 sparse-dist 1 --steps 400 --trace-steps 390:393
if command -v mpirun >/dev/null 2>&1; then
    run two_piped 2 sparse-dist 1
    run two_none 2 none 1
    run two_immediate 2 sparse-dist 0
else
    echo "check_mpi_device_trace: 2-rank cases skipped (no mpirun)"
    [ $fail = 0 ] && exit 77
fi
exit $fail
