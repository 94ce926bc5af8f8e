#!/usr/bin/python3
"""Criteo-shaped days in TorchRec's numpy layout and the same samples as TSV,
for tests/check_convert_npy.sh:

  npy_days.py OUT_DIR ROWS DAYS N [--negative] [--multi-hot H1,H2,...]

writes, per day d, OUT_DIR/day_d_{dense,sparse,labels}.npy (TorchRec's
dtypes: float32 (N, 13), int32 (N, F), int32 (N, 1)) and OUT_DIR/day_d.tsv:
the same samples as Criteo TSV whose parse gives the same numbers. Dense
counts x draw from [-2, 10^6]; the npy holds log(max(x, 0) + 1) computed in
float64 and rounded once to float32, the TSV's transform. Ids: with
--negative any int32 (a hex id past 2^31 as TorchRec stores it), and the
TSV holds the id numpy's `%` gives (TorchRec's hashing), else ids in
[0, 2^31) written as they are. With --multi-hot, MLPerf's layout instead of
the sparse array: OUT_DIR/day_d_sparse_multi_hot.npz (np.savez, members
"0".."F-1", int32 (N, H_f)), and no TSV. Day d draws from seed d.
"""
import sys

import numpy as np


def main():
    out, rows, days, n = sys.argv[1], [int(r) for r in sys.argv[2].split(",")], int(sys.argv[3]), int(sys.argv[4])
    negative = "--negative" in sys.argv[5:]
    multi = [int(h) for h in sys.argv[sys.argv.index("--multi-hot") + 1].split(",")] \
        if "--multi-hot" in sys.argv else None
    F = len(rows)
    for d in range(days):
        g = np.random.default_rng(d)
        x = g.integers(-2, 10**6, size=(n, 13), endpoint=True)
        small = g.random((n, 13)) < 0.5  # half the counts small, as Criteo's are
        x[small] = g.integers(-2, 20, size=int(small.sum()), endpoint=True)
        dense = np.log(np.maximum(x, 0).astype(np.float64) + 1).astype(np.float32)
        lo = -(2**31) if negative else 0
        sparse = g.integers(lo, 2**31, size=(n, F), dtype=np.int64).astype(np.int32)
        labels = (g.random((n, 1)) < 0.3).astype(np.int32)
        np.save(f"{out}/day_{d}_dense.npy", dense)
        np.save(f"{out}/day_{d}_labels.npy", labels)
        if multi:
            lo = -(2**31) if negative else 0
            bags = {str(f): g.integers(lo, 2**31, size=(n, h), dtype=np.int64).astype(np.int32)
                    for f, h in enumerate(multi)}
            np.savez(f"{out}/day_{d}_sparse_multi_hot.npz", **bags)
            continue
        np.save(f"{out}/day_{d}_sparse.npy", sparse)
        ids = sparse.astype(np.int64) % np.array(rows, dtype=np.int64) if negative else sparse
        with open(f"{out}/day_{d}.tsv", "w") as f:
            for i in range(n):
                f.write("\t".join([str(labels[i, 0])] + [str(v) for v in x[i]] +
                                  [format(int(v), "x") for v in ids[i]]) + "\n")


if __name__ == "__main__":
    main()
