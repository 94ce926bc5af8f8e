#!/usr/bin/python3
"""shardrec's binary sample format written with numpy from its description
(docs/data-format.md, "Binary format, version 1"), for tests that need bags
no converter writes: bags whose length varies from sample to sample, empty
ones included (`convert --npy` writes a fixed length a feature, at least 1).

  binfmt_write.py OUT ROWS N SEED LENGTHS [CHUNK]

writes N samples drawn from SEED over tables of ROWS (R0,R1,..): 13 dense
features log(x + 1) of counts x in [0, 1000] (float32), labels 1 with
probability 0.3, and feature f's bag of length drawn uniformly in LENGTHS'
entry f (N or MIN-MAX; one entry for every feature, or one per feature),
ids uniform in [0, rows[f]). CHUNK samples a chunk (default 512), so that a
chunk may hold a feature whose bags happen to share a length (stored fixed)
beside ones that vary (stored with offsets). No per-id weights.
"""
import sys

import numpy as np

MAGIC = b"\x89SRDATA\n"
VARIABLE = 0xFFFFFFFF


class Out:
    """Bytes with the format's 64-byte alignment."""

    def __init__(self):
        self.b = bytearray()

    def put(self, a):
        self.b += np.ascontiguousarray(a).tobytes()

    def pad(self):
        self.b += bytes(-len(self.b) % 64)


def write(path, rows, dense, labels, bags, chunk):
    """dense (N, D) float32, labels (N) 0/1, bags[f][s] an int array of sample s's ids."""
    F, N = len(rows), len(labels)
    o = Out()
    o.put(np.zeros(128, np.uint8))  # the header, written last
    o.put(np.array(rows, "<i8"))
    table = []
    for c0 in range(0, N, chunk):
        n = min(chunk, N - c0)
        o.pad()
        start = len(o.b)
        lens = [np.array([len(bags[f][s]) for s in range(c0, c0 + n)], np.uint64) for f in range(F)]
        fixed = [int(x[0]) if (x == x[0]).all() else VARIABLE for x in lens]
        o.put(np.array([n], "<u8"))
        for f in range(F):
            o.put(np.array([fixed[f], 0], "<u4"))
            o.put(np.array([lens[f].sum()], "<u8"))
        o.pad()
        o.put(dense[c0:c0 + n].astype("<f4"))
        o.pad()
        o.put(labels[c0:c0 + n].astype("u1"))
        o.pad()
        for f in range(F):
            if fixed[f] == VARIABLE:
                o.put(np.concatenate([[0], np.cumsum(lens[f])]).astype("<u8"))
                o.pad()
            o.put(np.concatenate([bags[f][s] for s in range(c0, c0 + n)]).astype("<u4"))
            o.pad()
        table.append((start, len(o.b) - start))
    o.pad()
    table_offset = len(o.b)
    o.put(np.array(table, "<u8").reshape(-1))
    most = max(sum(len(bags[f][s]) for f in range(F)) for s in range(N))
    head = MAGIC + np.array([1, 0, dense.shape[1], F, 4, chunk], "<u4").tobytes() + \
        np.array([N, len(table), most, len(o.b), table_offset], "<u8").tobytes()
    o.b[:len(head)] = head
    with open(path, "wb") as f:
        f.write(o.b)


def main():
    path, rows, n, seed = sys.argv[1], [int(r) for r in sys.argv[2].split(",")], int(sys.argv[3]), \
        int(sys.argv[4])
    spec = sys.argv[5].split(",")
    chunk = int(sys.argv[6]) if len(sys.argv) > 6 else 512
    spec = spec * len(rows) if len(spec) == 1 else spec
    assert len(spec) == len(rows) and max(rows) < 2**32, "LENGTHS: one entry, or one per table"
    g = np.random.default_rng(seed)
    dense = np.log(g.integers(0, 1000, size=(n, 13), endpoint=True) + 1.0).astype(np.float32)
    labels = (g.random(n) < 0.3).astype(np.uint8)
    bags = []
    for r, sp in zip(rows, spec):
        lo, hi = (int(x) for x in (sp.split("-") if "-" in sp else (sp, sp)))
        bags.append([g.integers(0, r, size=int(g.integers(lo, hi, endpoint=True)))
                     for _ in range(n)])
    write(path, rows, dense, labels, bags, chunk)


if __name__ == "__main__":
    main()
