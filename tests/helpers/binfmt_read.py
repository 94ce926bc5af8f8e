#!/usr/bin/python3
"""shardrec's binary sample format read with numpy from its description
(docs/data-format.md, "Binary format, version 1"), independent of the C
reader: read(path) -> (dense (N, D) float32, labels (N,) uint8, bags: a list
per feature of a list per sample of id arrays). For tests."""
import numpy as np

VARIABLE = 0xFFFFFFFF


def _align(x):
    return (x + 63) // 64 * 64


def read(path):
    b = open(path, "rb").read()
    assert b[:8] == b"\x89SRDATA\n", "magic"
    version, flags, D, F, id_bytes, C = np.frombuffer(b, "<u4", 6, 8)
    N, n_chunks, _max_values, size, table = np.frombuffer(b, "<u8", 5, 32)
    assert version == 1 and size == len(b)
    id_type = "<u4" if id_bytes == 4 else "<i8"
    dense, labels, bags = [], [], [[] for _ in range(F)]
    for c in range(int(n_chunks)):
        off = int(np.frombuffer(b, "<u8", 1, int(table) + 16 * c)[0])
        n = int(np.frombuffer(b, "<u8", 1, off)[0])
        head = np.frombuffer(b, "<u4", 4 * F, off + 8).reshape(F, 4)
        at = off + _align(8 + 16 * F)
        dense.append(np.frombuffer(b, "<f4", n * int(D), at).reshape(n, int(D)))
        at += _align(4 * n * int(D))
        labels.append(np.frombuffer(b, "u1", n, at))
        at = off + _align(at - off + n)
        for f in range(F):
            fixed = int(head[f, 0])
            nv = int(head[f, 2]) | int(head[f, 3]) << 32
            if fixed == VARIABLE:
                offs = np.frombuffer(b, "<u8", n + 1, at)
                at += _align(8 * (n + 1))
            else:
                offs = np.arange(n + 1, dtype=np.uint64) * fixed
            ids = np.frombuffer(b, id_type, nv, at)
            at += _align(int(id_bytes) * nv)
            if flags & 1:
                at += _align(4 * nv)
            bags[f].extend(ids[int(offs[s]):int(offs[s + 1])] for s in range(n))
    return np.concatenate(dense), np.concatenate(labels), bags
