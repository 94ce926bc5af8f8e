#!/usr/bin/env python3
"""compare.py A.jsonl B.jsonl RTOL STEPS [A.st B.st]: two runs' metrics (per-step
losses and eval_* values) within RTOL relative, and with two safetensors files
every weight too (|a - b| <= RTOL |a| + ATOL, ATOL from the environment,
default 1e-7). Prints the largest differences;
exit status 1 when any is past RTOL. Standard library only."""
import json, struct, sys
from array import array

def rows(p):
    return [json.loads(l) for l in open(p) if l.strip()]

def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        lo, hi = v["data_offsets"]
        out[k] = array("f", b[8 + n + lo:8 + n + hi])
    return out

a, b, rtol, steps = rows(sys.argv[1]), rows(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
la = {r["step"]: r for r in a}
lb = {r["step"]: r for r in b}
assert len(la) == steps and sorted(la) == sorted(lb), \
    f"logged steps differ: {len(la)} and {len(lb)} lines, expected {steps}"
worst, where, bad = 0.0, "", []
for s in sorted(la):
    for k in la[s]:
        if k != "loss" and not k.startswith("eval_") or not isinstance(la[s][k], (int, float)):
            continue
        x, y = la[s][k], lb[s].get(k)
        assert y is not None, f"step {s}: {k} missing in {sys.argv[2]}"
        r = abs(x - y) / max(abs(x), 1e-12)
        if r > worst:
            worst, where = r, f"step {s} {k}: {x!r} vs {y!r}"
        if r > rtol:
            bad.append(f"step {s} {k}: {x!r} vs {y!r} (rel {r:.2e})")
wmax = 0.0
atol = float(__import__('os').environ.get('ATOL', '1e-7'))
if len(sys.argv) > 6:
    wa, wb = tensors(sys.argv[5]), tensors(sys.argv[6])
    assert wa.keys() == wb.keys(), (sorted(wa), sorted(wb))
    for k in sorted(wa):
        for x, y in zip(wa[k], wb[k]):
            d = abs(x - y)
            if d > rtol * abs(x) + atol:
                bad.append(f"weight {k}: {x!r} vs {y!r}")
                break
            wmax = max(wmax, d / (abs(x) + 1e-6))
for line in bad[:10]:
    print("  " + line)
msg = f"losses/eval max rel diff {worst:.1e}" + (f" ({where})" if where else " (identical)")
if len(sys.argv) > 6:
    msg += f", weights max rel diff {wmax:.1e}"
print(msg)
sys.exit(1 if bad else 0)
