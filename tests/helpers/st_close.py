# st_close.py A B: the tensors of safetensors files A and B (fp32) agree
# within 1e-5 relative (magnitudes floored at 0.1); prints the worst.
import json, struct, sys
import numpy as np
def st(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32).reshape(v["shape"])
            for k, v in h.items() if k != "__metadata__"}
a, b = st(sys.argv[1]), st(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
worst = max(float((np.abs(a[k] - b[k]) / np.maximum(np.abs(b[k]), 0.1)).max()) for k in a)
assert worst <= 1e-5, worst
print("worst relative difference %.2e" % worst)
