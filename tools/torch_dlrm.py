#!/usr/bin/python3
"""The DLRM of DESIGN.md's numerical contract, in PyTorch, for checking shardrec.

Builds the same model as shardrec (an EmbeddingBag per table, pooling by sum, or
by mean where the weights file records it (docs/weights.md, "Metadata"); bottom
MLP with ReLU after every layer, the last included; dot interaction over
X = [z, e_1..e_F], strict lower triangle row by row, or (init --interaction dcn)
DCNv2 cross layers as TorchRec's LowRankCrossNet, x_{l+1} = x_0 * (W_l (V_l x_l)
+ b_l) + x_l on x_0 = concat(z, e_1..e_F); top MLP with ReLU after all but the
last layer; BCE with logits, mean over the batch), with the module
layout and parameter names of the PyTorch DLRM reference (facebookresearch/
dlrm): bot_l.2K, top_l.2K, emb_l.i. It reads Criteo TSV exactly as DESIGN.md
says and trains in file order, so that, from the same weights file, its
per-step losses and final weights can be compared with shardrec's.

Optimizers (train --optimizer for the MLPs, --emb-optimizer for the tables),
each with PyTorch's defaults, never shardrec's:
  sgd, adagrad, adam      torch.optim.SGD / Adagrad / Adam (Adagrad: eps 1e-10,
                          initial accumulator 0; Adam: betas 0.9, 0.999, eps 1e-8)
  rowwise_adagrad         (tables only) written out here as FBGEMM's
                          EXACT_ROWWISE_ADAGRAD: for each row r a batch touched,
                          s_r += mean(g_r^2) over its D values,
                          w_r -= lr * g_r / (sqrt(s_r) + eps), eps 1e-8, s from 0
  adam (tables)           written out here: SparseAdam's semantics (only the rows
                          a batch touched update their moments and weights; bias
                          correction by the global step) with torch.optim.Adam's
                          formula, w -= lr * m^ / (sqrt(v^) + eps), as DESIGN.md
  sparse_adam (tables)    torch.optim.SparseAdam itself, which adds eps before the
                          bias correction: w -= lr * m^ / (sqrt(v^) + eps / sqrt(1 - b2^t));
                          for measuring that difference, not for the check

Weights files are safetensors, read and written here by a small pure-Python
codec (8-byte little-endian header length, JSON header, raw little-endian
data), so the only dependencies are numpy and, for init, train and predict only,
PyTorch (Debian's python3-torch 1.13 works); the other subcommands do not
import torch, which keeps them fast.

Subcommands (each has --help):
  init      write reference-style initial weights under shardrec's names
  train     train from a weights file on a TSV file; write per-step losses and
            the final weights
  convert   rename tensors between shardrec's names and the reference's (which
            pools by sum: a table recorded mean is refused)
  list      print the tensors of a safetensors file and its pooling records
  compare-losses   per-step losses of two runs (shardrec --metrics JSONL or
            this tool's), max relative difference, fail above --rtol
  compare-weights  two weights files, allclose per tensor, fail if any differs (or the
                   tables' pooling records do)
  compare-reference  a run against train --dtype float64's weights, element by
            element, allowed a multiple of how far float32 PyTorch runs of the same
            problem (train --jitter SEED) land from them
  predict   every sample of a TSV or shardrec binary file (multi-hot bags too)
            through the model in float64: label, probability
  check-eval  shardrec eval's --out against predict's, and its --metrics against
            the metrics recomputed in numpy from its --out

Names: bot_mlp.K.weight/bias <-> bot_l.{2K}.weight/bias,
       top_mlp.K.weight/bias <-> top_l.{2K}.weight/bias,
       dcn.L.V / dcn.L.U / dcn.L.bias <-> crossnet.V_kernels.L / crossnet.W_kernels.L /
       crossnet.bias.L (TorchRec's LowRankCrossNet; the bias is [n] here, [n, 1] there),
       the model being DCN when a file holds them,
       emb.TABLE.weight [rows, D] <-> emb_l.{i}.weight, i the table's position.
Tables are ordered by the natural order of their names (t2 before t10) unless
--tables gives the order; feature f of the TSV looks up table f.

Exit status: 0 done (for compare-* and check-eval: they agree); 1 a comparison
found a difference; 2 input refused (a malformed file, a flag that does not fit
the file, and argparse's usage errors), the message naming the file.
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np



def refuse(msg):
    """Input this tool will not read (a file, a flag, a record): the message on stderr and exit
    status 2, as shardrec's for bad input; a comparison that finds a difference exits 1."""
    print(msg, file=sys.stderr)
    sys.exit(2)


# ---- safetensors (F32 as shardrec; F64 for train --dtype float64) -------------------------

ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8")}


def st_load(path):
    """name -> float32 (F32) or float64 (F64) numpy array (st_read without __metadata__)."""
    return st_read(path)[0]


def unique_keys(pairs):
    """json.loads's object_pairs_hook: a key named twice is an error, as in shardrec."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f'key "{k}" appears twice')
        out[k] = v
    return out


def st_read(path):
    """(name -> float32 (F32) or float64 (F64) numpy array, __metadata__ as a dict of strings).
    Verifies the offsets as shardrec does."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        refuse(f"{path}: cannot read ({e.strerror})")
    if len(buf) < 8:
        refuse(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", buf[:8])
    if n < 2 or 8 + n > len(buf):
        refuse(f"{path}: header length {n} does not fit the file ({len(buf)} bytes)")
    try:
        header = json.loads(buf[8 : 8 + n].decode("utf-8"), object_pairs_hook=unique_keys)
    except ValueError as e:  # UnicodeDecodeError, JSONDecodeError and unique_keys's
        refuse(f"{path}: the header is not one JSON object ({e})")
    if not isinstance(header, dict):
        refuse(f"{path}: the header is not a JSON object")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        refuse(f"{path}: __metadata__ is not an object of strings")
    data = memoryview(buf)[8 + n :]
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ST_DTYPES:
            refuse(f"{path}: tensor {name} has dtype {info['dtype']}; F32 or F64 only")
        np_dtype = ST_DTYPES[info["dtype"]]
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(x) for x in info["data_offsets"])
        numel = math.prod(shape)
        if not (0 <= begin <= end <= len(data)) or end - begin != np_dtype.itemsize * numel:
            refuse(f"{path}: tensor {name} has bad data_offsets [{begin}, {end}]")
        spans.append((begin, end, name))
        arr = np.frombuffer(data, dtype=np_dtype, count=numel, offset=begin).reshape(shape)
        out[name] = arr.astype(np_dtype.newbyteorder("="), copy=True)
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin != pos:
            refuse(f"{path}: tensor {name} overlaps or leaves a gap at {pos}")
        pos = end
    if pos != len(data):
        refuse(f"{path}: {len(data) - pos} trailing bytes")
    return out, meta


def st_save(path, tensors, pooling=None):
    """Write name -> array as safetensors, atomically (PATH.tmp, fsync, rename): F64 for
    float64 arrays (train --dtype float64 and what is read from its files), else F32.
    pooling (table -> "sum" or "mean") adds shardrec's records to __metadata__, sorted by
    key as shardrec writes them."""
    meta = {"format": "pt"}
    meta.update({pooling_key(t): p for t, p in (pooling or {}).items()})
    header = {"__metadata__": dict(sorted(meta.items()))}
    blobs, off = [], 0
    for name in sorted(tensors):
        f64 = np.asarray(tensors[name]).dtype == np.float64
        a = np.ascontiguousarray(tensors[name], dtype="<f8" if f64 else "<f4")
        raw = a.tobytes()
        header[name] = {"dtype": "F64" if f64 else "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- pooling records (docs/weights.md, "Metadata") ------------------------------------------
# shardrec's weights files record each table's pooling in __metadata__ as
# "shardrec.emb.TABLE.pooling": "sum" or "mean"; a file without them (older shardrec, the
# reference, other PyTorch writers) pools by sum. Read here as src/train/weights_meta.c does.

POOLING_PREFIX, POOLING_SUFFIX = "shardrec.emb.", ".pooling"
HINT_DAMAGED = "HINT: the file's header is damaged; write the file again (train --save-weights, " \
               "shardrec export)"


def pooling_key(table):
    return f"{POOLING_PREFIX}{table}{POOLING_SUFFIX}"


def read_pooling(path, meta, names):
    """table -> "sum" or "mean", for the tables the file records (not every table need be
    recorded). Other keys are ignored, as shardrec does. Refused (exit status 2), naming the
    file and the key: a value other than sum or mean, an empty table name, a table the file's
    tensors `names` do not hold (emb.TABLE.weight)."""
    tables = {m.group(1) for n in names if (m := re.fullmatch(r"emb\.(.+)\.weight", n))}
    p, q = len(POOLING_PREFIX), len(POOLING_SUFFIX)
    out = {}
    for key, value in meta.items():
        if len(key) < p + q or key[:p] != POOLING_PREFIX or key[len(key) - q:] != POOLING_SUFFIX:
            continue  # not a pooling record
        table = key[p : len(key) - q]
        if not table:
            refuse(f'{path}: __metadata__ key "{key}" names no table; {HINT_DAMAGED}')
        if value not in ("sum", "mean"):
            refuse(f'{path}: __metadata__ "{key}" is "{value[:32]}", not "sum" or "mean"; '
                   f"{HINT_DAMAGED}")
        if table not in tables:
            refuse(f'{path}: __metadata__ "{key}" records a table the file\'s tensors do not '
                   f"hold (no emb.{table}.weight); {HINT_DAMAGED}")
        out[table] = value
    return out


def describe_pooling(recorded):
    """The records in a few words, as `shardrec inspect` says them."""
    if not recorded:
        return "not recorded (sum)"
    kinds = set(recorded.values())
    if len(kinds) == 1:
        return f"{kinds.pop()}, recorded for {len(recorded)} table" + "s" * (len(recorded) > 1)
    return "recorded per table, " + ", ".join(
        f"{t} {recorded[t]}" for t in sorted(recorded, key=natural_key))


# ---- names -------------------------------------------------------------------------------


def natural_key(s):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def table_order(names, given):
    tables = sorted({m.group(1) for n in names if (m := re.fullmatch(r"emb\.(.+)\.weight", n))},
                    key=natural_key)
    if given:
        order = given.split(",")
        if sorted(order) != sorted(tables):
            refuse(f"--tables {given} does not list the file's tables {','.join(tables)}")
        return order
    return tables


DCN_TO_REF = {"V": "V_kernels", "U": "W_kernels", "bias": "bias"}
DCN_FROM_REF = {v: k for k, v in DCN_TO_REF.items()}


def to_reference(sd, tables_flag=None):
    """shardrec names -> reference names."""
    order = table_order(sd.keys(), tables_flag)
    out = {}
    for name, t in sd.items():
        m = re.fullmatch(r"(bot|top)_mlp\.(\d+)\.(weight|bias)", name)
        e = re.fullmatch(r"emb\.(.+)\.weight", name)
        c = re.fullmatch(r"dcn\.(\d+)\.(V|U|bias)", name)
        if m:
            out[f"{m.group(1)}_l.{2 * int(m.group(2))}.{m.group(3)}"] = t
        elif c:
            out[f"crossnet.{DCN_TO_REF[c.group(2)]}.{c.group(1)}"] = t
        elif e:
            out[f"emb_l.{order.index(e.group(1))}.weight"] = t
        else:
            refuse(f"tensor {name} is not a shardrec DLRM parameter")
    return out


def from_reference(sd, tables_flag=None):
    """reference names -> shardrec names (tables t0.. unless --tables names them)."""
    n_emb = sum(1 for n in sd if n.startswith("emb_l."))
    names = tables_flag.split(",") if tables_flag else [f"t{i}" for i in range(n_emb)]
    if len(names) != n_emb:
        refuse(f"--tables names {len(names)} tables, the file has {n_emb}")
    out = {}
    for name, t in sd.items():
        m = re.fullmatch(r"(bot|top)_l\.(\d+)\.(weight|bias)", name)
        e = re.fullmatch(r"emb_l\.(\d+)\.weight", name)
        c = re.fullmatch(r"crossnet\.(V_kernels|W_kernels|bias)\.(\d+)", name)
        if m and int(m.group(2)) % 2 == 0:
            out[f"{m.group(1)}_mlp.{int(m.group(2)) // 2}.{m.group(3)}"] = t
        elif c:
            out[f"dcn.{c.group(2)}.{DCN_FROM_REF[c.group(1)]}"] = t
        elif e:
            out[f"emb.{names[int(e.group(1))]}.weight"] = t
        else:
            refuse(f"tensor {name} is not a DLRM reference parameter")
    return out


# ---- the model ---------------------------------------------------------------------------


def dlrm_class(torch):
    """The model, built on the torch module passed in (imported only by init/train)."""
    nn = torch.nn

    def mlp(widths, relu_last):
        layers = []
        for k in range(len(widths) - 1):
            layers.append(nn.Linear(widths[k], widths[k + 1]))
            if k < len(widths) - 2 or relu_last:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class LowRankCrossNet(nn.Module):
        """TorchRec's LowRankCrossNet (torchrec/modules/crossnet.py): per layer
        x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l, W_l [n, R], V_l [R, n], b_l [n]
        (TorchRec's b_l is [n, 1]; its values are the same)."""

        def __init__(self, n, layers, rank):
            super().__init__()
            self.V_kernels = nn.ParameterList(nn.Parameter(torch.empty(rank, n)) for _ in range(layers))
            self.W_kernels = nn.ParameterList(nn.Parameter(torch.empty(n, rank)) for _ in range(layers))
            self.bias = nn.ParameterList(nn.Parameter(torch.zeros(n)) for _ in range(layers))

        def forward(self, x0):
            xl = x0
            for V, W, b in zip(self.V_kernels, self.W_kernels, self.bias):
                xl = x0 * ((xl @ V.t()) @ W.t() + b) + xl
            return xl

    class DLRM(nn.Module):
        """The reference's module layout: bot_l, emb_l, top_l (and crossnet for DCN)."""

        def __init__(self, bot, top, rows, dim, sparse=False, dcn=None, pooling=None):
            """dcn: None (dot interaction) or (layers, rank): DCNv2 cross layers.
            pooling: per table, "sum" (default) or "mean": EmbeddingBag's mean is shardrec's,
            the bag's sum divided by its length, 0 for an empty bag (PyTorch, as shardrec,
            refuses per-id weights with mean)."""
            super().__init__()
            num_f = len(rows)
            self.bot_l = mlp(bot, relu_last=True)
            pooling = pooling or ["sum"] * num_f
            self.emb_l = nn.ModuleList(nn.EmbeddingBag(r, dim, mode=p, sparse=sparse)
                                       for r, p in zip(rows, pooling))
            self.crossnet = None
            width = dim + num_f * (num_f + 1) // 2
            if dcn:
                width = (num_f + 1) * dim
                self.crossnet = LowRankCrossNet(width, *dcn)
            self.top_l = mlp([width] + top, relu_last=False)
            li, lj = [], []
            for i in range(num_f + 1):  # strict lower triangle of X X^T, row by row
                for j in range(i):
                    li.append(i)
                    lj.append(j)
            self.register_buffer("li", torch.tensor(li), persistent=False)
            self.register_buffer("lj", torch.tensor(lj), persistent=False)

        def forward(self, dense, ids):
            """dense (B, 13) float32; ids (F, B) int64, one id per bag, or per feature a pair
            (values (N_f), offsets (B)) int64, sample s's bag values[offsets[s]:offsets[s+1]]
            (of any length, 0 included) -> logits (B)."""
            B = dense.shape[0]
            z = self.bot_l(dense)
            if torch.is_tensor(ids):
                one = torch.arange(B, dtype=torch.int64)
                ids = [(ids[f], one) for f in range(ids.shape[0])]
            e = [emb(v, o) for (v, o), emb in zip(ids, self.emb_l)]
            if self.crossnet is not None:
                return self.top_l(self.crossnet(torch.cat([z] + e, dim=1))).squeeze(1)
            X = torch.stack([z] + e, dim=1)  # (B, F+1, D)
            Z = torch.bmm(X, X.transpose(1, 2))
            inter = torch.cat([z, Z[:, self.li, self.lj]], dim=1)
            return self.top_l(inter).squeeze(1)

    return DLRM


def model_from_weights(torch, ref, sparse=False, pooling=None):
    """Build a DLRM whose shapes match reference-named arrays, and load them; pooling: per
    table in emb_l's order, "sum" (default) or "mean"."""
    def widths(prefix):
        ks = sorted(int(n.split(".")[1]) for n in ref if n.startswith(prefix) and n.endswith(".weight"))
        w = [ref[f"{prefix}{k}.weight"] for k in ks]
        return [w[0].shape[1]] + [x.shape[0] for x in w]
    n_emb = sum(1 for n in ref if n.startswith("emb_l."))
    embs = [ref[f"emb_l.{i}.weight"] for i in range(n_emb)]
    n_dcn = sum(1 for n in ref if n.startswith("crossnet.V_kernels."))
    dcn = (n_dcn, ref["crossnet.V_kernels.0"].shape[0]) if n_dcn else None
    m = dlrm_class(torch)(widths("bot_l."), widths("top_l.")[1:], [e.shape[0] for e in embs],
                          embs[0].shape[1], sparse=sparse, dcn=dcn, pooling=pooling)
    m.load_state_dict({k: torch.from_numpy(v) for k, v in ref.items()}, strict=True)
    return m


# ---- Criteo TSV, as DESIGN.md says -------------------------------------------------------


def read_tsv(path, rows, limit):
    """First `limit` lines -> numpy labels (N), dense (N, 13), ids (F, N).
    dense x -> log(max(x, 0) + 1) in double, rounded once to float; missing -> 0.
    categorical hex -> uint32 -> mod rows[f]; missing -> 0."""
    labels, dense, ids = [], [], []
    F = len(rows)
    with open(path, "r", newline="") as f:
        for lineno, line in enumerate(f, 1):
            if len(labels) == limit:
                break
            fields = line.rstrip("\n").rstrip("\r").split("\t")
            if len(fields) != 14 + F:
                refuse(f"{path}:{lineno}: {len(fields)} fields, expected {14 + F}")
            labels.append(float(fields[0]))
            dense.append([math.log1p(max(int(x), 0)) if x else 0.0 for x in fields[1:14]])
            ids.append([int(h, 16) % rows[k] if h else 0 for k, h in enumerate(fields[14:])])
    return (np.array(labels, dtype=np.float32),
            np.array(dense, dtype=np.float64).astype(np.float32),
            np.ascontiguousarray(np.array(ids, dtype=np.int64).reshape(-1, F).T))


# ---- shardrec's binary samples, as docs/data-format.md says (predict only) ------------------

BIN_MAGIC = b"\x89SRDATA\n"
BIN_VARIABLE = 0xFFFFFFFF


def is_bin(path):
    try:
        with open(path, "rb") as f:
            return f.read(len(BIN_MAGIC)) == BIN_MAGIC
    except OSError as e:
        refuse(f"{path}: cannot read ({e.strerror})")


def read_bin(path, rows):
    """A shardrec binary file ("Binary format, version 1") -> numpy labels (N), dense (N, D),
    and per feature f a pair (values (N_f), offsets (N)) int64: sample s's bag is
    values[offsets[s]:offsets[s+1]], of any length, 0 included (multi-hot files). Refused:
    another magic or version, per-id weights (not read here), rows other than the model's,
    a chunk outside the file, an id outside [0, rows)."""
    b = open(path, "rb").read()
    if len(b) < 128 + 8 * len(rows) or b[:8] != BIN_MAGIC:
        refuse(f"{path}: not a shardrec binary file")
    version, flags, D, F, id_bytes, _C = (int(x) for x in np.frombuffer(b, "<u4", 6, 8))
    N, n_chunks, _most, size, table = (int(x) for x in np.frombuffer(b, "<u8", 5, 32))
    if version != 1 or size != len(b) or id_bytes not in (4, 8):
        refuse(f"{path}: version {version}, size {size} of {len(b)} bytes, id_bytes {id_bytes}: "
               "not a version 1 file this tool reads")
    if flags:
        refuse(f"{path}: holds per-id weights (flags {flags}), which this tool does not read")
    if F != len(rows) or list(np.frombuffer(b, "<i8", F, 128)) != list(rows):
        refuse(f"{path}: its ids were reduced modulo rows {list(np.frombuffer(b, '<i8', F, 128))}, "
               f"the weights' tables have {list(rows)}")
    align = lambda x: (x + 63) // 64 * 64  # noqa: E731
    dense, labels, values, offsets = [], [], [[] for _ in range(F)], [[] for _ in range(F)]
    base = [0] * F
    try:
        for c in range(n_chunks):
            off = int(np.frombuffer(b, "<u8", 1, table + 16 * c)[0])
            n = int(np.frombuffer(b, "<u8", 1, off)[0])
            head = np.frombuffer(b, "<u4", 4 * F, off + 8).reshape(F, 4)
            at = off + align(8 + 16 * F)
            dense.append(np.frombuffer(b, "<f4", n * D, at).reshape(n, D))
            at += align(4 * n * D)
            labels.append(np.frombuffer(b, "u1", n, at))
            at += align(n)
            for f in range(F):
                fixed, nv = int(head[f, 0]), int(head[f, 2]) | int(head[f, 3]) << 32
                if fixed == BIN_VARIABLE:
                    o = np.frombuffer(b, "<u8", n + 1, at).astype(np.int64)
                    at += align(8 * (n + 1))
                else:
                    o = np.arange(n + 1, dtype=np.int64) * fixed
                if o[0] != 0 or o[-1] != nv or (np.diff(o) < 0).any():
                    refuse(f"{path}: chunk {c}, feature {f}: bad offsets")
                ids = np.frombuffer(b, "<u4" if id_bytes == 4 else "<i8", nv, at).astype(np.int64)
                at += align(id_bytes * nv)
                if nv and not (0 <= ids.min() and ids.max() < rows[f]):
                    refuse(f"{path}: chunk {c}, feature {f}: an id outside [0, {rows[f]})")
                values[f].append(ids)
                offsets[f].append(o[:-1] + base[f])
                base[f] += nv
    except ValueError as e:  # np.frombuffer past the end of the file
        refuse(f"{path}: a chunk lies outside the file ({e})")
    if not labels:
        refuse(f"{path}: holds no samples")
    if sum(len(x) for x in labels) != N:
        refuse(f"{path}: its chunks hold {sum(len(x) for x in labels)} samples, "
               f"the header says {N}")
    bags = [(np.concatenate(values[f] or [np.zeros(0, np.int64)]),
             np.concatenate(offsets[f] or [np.zeros(0, np.int64)])) for f in range(F)]
    return (np.concatenate(labels).astype(np.float32),
            np.concatenate(dense).astype(np.float32), bags)


# ---- subcommands ----------------------------------------------------------------------------


def cmd_init(a):
    import torch
    g = torch.Generator().manual_seed(a.seed)
    rows = [int(r) for r in a.table_rows.split(",")]
    bot = [int(w) for w in a.bot_mlp.split("-")]
    top = [int(w) for w in a.top_mlp.split("-")]
    F = len(rows)
    sd = {}
    width = bot[-1] + F * (F + 1) // 2
    if a.interaction == "dcn":
        # TorchRec's LowRankCrossNet: xavier_normal_ kernels (std sqrt(2 / (n + R)), drawn
        # here from the seeded generator), zero bias
        width = (F + 1) * bot[-1]
        std = math.sqrt(2 / (width + a.dcn_rank))
        for k in range(a.dcn_layers):
            sd[f"dcn.{k}.V"] = torch.randn(a.dcn_rank, width, generator=g) * std
            sd[f"dcn.{k}.U"] = torch.randn(width, a.dcn_rank, generator=g) * std
            sd[f"dcn.{k}.bias"] = torch.zeros(width)
    for prefix, ws in (("bot_mlp", bot), ("top_mlp", [width] + top)):
        for k in range(len(ws) - 1):  # the reference's init
            n_in, n_out = ws[k], ws[k + 1]
            sd[f"{prefix}.{k}.weight"] = torch.randn(n_out, n_in, generator=g) * math.sqrt(2 / (n_in + n_out))
            sd[f"{prefix}.{k}.bias"] = torch.randn(n_out, generator=g) * math.sqrt(1 / n_out)
    for t, r in enumerate(rows):
        bound = math.sqrt(1 / r)
        sd[f"emb.t{t}.weight"] = (torch.rand(r, bot[-1], generator=g) * 2 - 1) * bound
    st_save(a.out, {k: v.numpy() for k, v in sd.items()}, {f"t{t}": a.pooling for t in range(F)})


def perturb(sd, spec):
    name, index, delta = spec.rsplit(":", 2)
    flat = sd[name].reshape(-1)  # a view: sd[name] is contiguous
    flat[int(index)] += np.float32(delta)


def jitter(sd, seed):
    """Move every initial weight by -1, 0 or +1 ulp (float32), drawn from `seed`: the same
    problem to float32 precision, but every rounding of the run that follows falls
    differently. Float32 runs from several jitter seeds show how far float32 rounding
    alone carries each weight (compare-reference)."""
    rng = np.random.default_rng(seed)
    for name in sorted(sd):
        w = sd[name]
        step = rng.integers(-1, 2, size=w.shape)
        toward = np.where(step > 0, np.float32(np.inf), np.float32(-np.inf)).astype(w.dtype)
        w[...] = np.where(step == 0, w, np.nextafter(w, toward))


# ---- optimizers ----------------------------------------------------------------------------
# The written-out ones take per table the unique rows the batch touched; their
# constants are written here from the FBGEMM and PyTorch documentation.
ROWWISE_ADAGRAD_EPS = 1e-8  # FBGEMM SplitTableBatchedEmbeddingBagsCodegen default
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam / SparseAdam defaults


class RowwiseAdagrad:
    """s_r += mean(g_r^2); w_r -= lr * g_r / (sqrt(s_r) + eps), touched rows r only."""

    def __init__(self, torch, params, lr, eps=ROWWISE_ADAGRAD_EPS):
        self.torch, self.params, self.lr, self.eps = torch, list(params), lr, eps
        self.sums = [torch.zeros(p.shape[0], dtype=p.dtype) for p in self.params]

    def step(self, touched):
        with self.torch.no_grad():
            for p, s, rows in zip(self.params, self.sums, touched):
                g = p.grad[rows]
                s[rows] += g.pow(2).mean(dim=1)
                p[rows] -= self.lr * g / (s[rows].sqrt() + self.eps).unsqueeze(1)


class TouchedRowsAdam:
    """Adam on the touched rows only (SparseAdam's semantics), t the global step:
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)."""

    def __init__(self, torch, params, lr, betas=ADAM_BETAS, eps=ADAM_EPS):
        self.torch, self.params, self.lr, self.betas, self.eps = torch, list(params), lr, betas, eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def step(self, touched):
        self.t += 1
        b1, b2 = self.betas
        bc1, bc2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        with self.torch.no_grad():
            for p, m, v, rows in zip(self.params, self.m, self.v, touched):
                g = p.grad[rows]
                m[rows] = b1 * m[rows] + (1 - b1) * g
                v[rows] = b2 * v[rows] + (1 - b2) * g * g
                p[rows] -= self.lr * (m[rows] / bc1) / ((v[rows] / bc2).sqrt() + self.eps)


class TorchStep:
    """A torch.optim optimizer behind the same step(touched) call."""

    def __init__(self, opt):
        self.opt = opt

    def step(self, touched):
        self.opt.step()


def make_optimizer(torch, kind, params, lr, tables):
    params = list(params)
    if kind == "sgd":
        return TorchStep(torch.optim.SGD(params, lr=lr))
    if kind == "adagrad":
        return TorchStep(torch.optim.Adagrad(params, lr=lr))
    if kind == "adam" and not tables:
        return TorchStep(torch.optim.Adam(params, lr=lr))
    if kind == "adam":
        return TouchedRowsAdam(torch, params, lr)
    if kind == "sparse_adam" and tables:
        return TorchStep(torch.optim.SparseAdam(params, lr=lr))
    if kind == "rowwise_adagrad" and tables:
        return RowwiseAdagrad(torch, params, lr)
    refuse(f"optimizer {kind} is not available for the {'tables' if tables else 'MLPs'}")


def cmd_train(a):
    import torch
    torch.set_num_threads(a.threads)
    sd, meta = st_read(a.weights)
    pooling = table_pooling(sd.keys(), read_pooling(a.weights, meta, sd.keys()))
    if is_bin(a.data):
        refuse(f"{a.data}: train reads Criteo TSV only (predict reads shardrec's binary files too)")
    if a.perturb:
        perturb(sd, a.perturb)
    if a.jitter is not None:
        jitter(sd, a.jitter)
    order = table_order(sd.keys(), a.tables)
    model = model_from_weights(torch, to_reference(sd, a.tables),
                               sparse=a.emb_optimizer == "sparse_adam",
                               pooling=[pooling[t] for t in order])
    rows = [sd[f"emb.{t}.weight"].shape[0] for t in order]
    B = a.batch_size
    labels, dense, ids = (torch.from_numpy(x) for x in read_tsv(a.data, rows, a.steps * B))
    if a.dtype == "float64":
        # the same run in float64: the float32 initial weights, labels and dense
        # features (already rounded to float32 as DESIGN.md says) widen exactly;
        # every later operation and the optimizers' state are float64
        model.double()
        labels, dense = labels.double(), dense.double()
    steps = min(a.steps, labels.shape[0] // B)  # a partial last batch is dropped
    emb_lr = a.emb_lr if a.emb_lr > 0 else a.lr
    dense_params = list(model.bot_l.parameters()) + list(model.top_l.parameters())
    if model.crossnet is not None:  # the cross layers are dense parameters, as in shardrec
        dense_params += list(model.crossnet.parameters())
    dense_opt = make_optimizer(torch, a.optimizer, dense_params, a.lr, tables=False)
    emb_opt = make_optimizer(torch, a.emb_optimizer, [e.weight for e in model.emb_l], emb_lr,
                             tables=True)
    loss_fn = torch.nn.BCEWithLogitsLoss(reduction="mean")
    out = open(a.losses, "w") if a.losses else None
    for step in range(1, steps + 1):
        s = slice((step - 1) * B, step * B)
        loss = loss_fn(model(dense[s], ids[:, s]), labels[s])
        model.zero_grad(set_to_none=True)
        loss.backward()
        dense_opt.step(None)
        emb_opt.step([torch.unique(ids[f, s]) for f in range(ids.shape[0])])
        if out:
            out.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
    if out:
        out.close()
    if a.save:
        final = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        st_save(a.save, from_reference(final, ",".join(order)), pooling)
    print(f"torch_dlrm: {steps} steps of batch {B}, last loss {loss.item():.6f}", file=sys.stderr)


def table_pooling(names, recorded):
    """Every table of the tensor names' pooling: its record (read_pooling), else sum."""
    tables = [m.group(1) for n in names if (m := re.fullmatch(r"emb\.(.+)\.weight", n))]
    return {t: recorded.get(t, "sum") for t in tables}


def cmd_convert(a):
    """--to reference: the reference pools every table by sum, so a table recorded mean is
    refused (its model would compute other predictions from these weights); the output holds
    no pooling records, their table names being gone. --to shardrec: every table recorded
    sum, the reference's pooling."""
    sd, meta = st_read(a.input)
    if a.to == "reference":
        mean = [t for t, p in sorted(read_pooling(a.input, meta, sd.keys()).items(),
                                     key=lambda tp: natural_key(tp[0])) if p == "mean"]
        if mean:
            which = ", ".join(mean[:5]) + (f" and {len(mean) - 5} more" if len(mean) > 5 else "")
            refuse(f"{a.input}: table{'s' if len(mean) > 1 else ''} {which} pool"
                   f"{'' if len(mean) > 1 else 's'} by mean (__metadata__ "
                   f'"{pooling_key(mean[0])}"), but the reference DLRM (facebookresearch/dlrm) '
                   "pools every table by sum, so it would compute another model from these "
                   f"weights; nothing written to {a.output}. HINT: evaluate the file itself "
                   "(this tool's predict, shardrec eval), or train with --pooling sum for the "
                   "reference")
        st_save(a.output, to_reference(sd, a.tables))
    else:
        out = from_reference(sd, a.tables)
        st_save(a.output, out, table_pooling(out.keys(), {}))


def cmd_list(a):
    sd, meta = st_read(a.file)
    for name, t in sd.items():
        print(f"{name}\t{'F64' if t.dtype == np.float64 else 'F32'}\t{list(t.shape)}")
    print("pooling: " + describe_pooling(read_pooling(a.file, meta, sd.keys())))


def cmd_predict(a):
    """Every sample of a TSV or binary file through the model in float64, each table pooling
    as the weights file records (else sum): label, tab, probability."""
    import torch
    sd, meta = st_read(a.weights)
    recorded = read_pooling(a.weights, meta, sd.keys())
    pooling = table_pooling(sd.keys(), recorded)
    order = table_order(sd.keys(), a.tables)
    model = model_from_weights(torch, to_reference(sd, a.tables),
                               pooling=[pooling[t] for t in order]).double()
    if recorded:
        print(f"predict: pooling as {a.weights} records it: {describe_pooling(recorded)}",
              file=sys.stderr)
    rows = [sd[f"emb.{t}.weight"].shape[0] for t in order]
    if is_bin(a.data):
        labels, dense, bags = read_bin(a.data, rows)
        ids = [(torch.from_numpy(v), torch.from_numpy(o)) for v, o in bags]
    else:
        labels, dense, ids = read_tsv(a.data, rows, -1)
        ids = torch.from_numpy(ids)
    if dense.shape[1] != model.bot_l[0].in_features:
        refuse(f"{a.data}: {dense.shape[1]} dense features a sample, the model takes "
               f"{model.bot_l[0].in_features}")
    with torch.no_grad():
        logits = model(torch.from_numpy(dense).double(), ids)
    prob = torch.sigmoid(logits).numpy()
    with open(a.out, "w") as f:
        for y, q in zip(labels, prob):
            f.write(f"{int(y)}\t{q:.17g}\n")


def read_predictions(path):
    """label<TAB>probability lines -> (labels, probabilities), float64."""
    y, p = [], []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2:
                refuse(f"{path}:{lineno}: {len(fields)} fields, expected label<TAB>probability")
            y.append(float(fields[0]))
            p.append(float(fields[1]))
    return np.array(y), np.array(p)


def metrics_of(y, p):
    """Exact AUC (tied scores share an averaged rank), log loss clamped to
    [1e-7, 1 - 1e-7], NE, accuracy at 0.5, positive rate: float64, numpy alone."""
    order = np.argsort(p, kind="stable")
    ranks = np.empty(len(p))
    sp = p[order]
    i = 0
    while i < len(sp):  # average ranks over runs of equal scores
        j = i
        while j + 1 < len(sp) and sp[j + 1] == sp[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y.sum()
    neg = len(y) - pos
    auc = (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)
    q = np.clip(p, 1e-7, 1 - 1e-7)
    logloss = float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))
    r = pos / len(y)
    ne = logloss / float(-(r * math.log(r) + (1 - r) * math.log(1 - r)))
    acc = float(np.mean((p >= 0.5) == (y == 1)))
    return {"samples": len(y), "auc": float(auc), "logloss": logloss, "ne": ne, "accuracy": acc,
            "positive_rate": float(r)}


def cmd_check_eval(a):
    """shardrec eval's --out against the float64 PyTorch predictions, and its
    --metrics against the metrics recomputed here from its own --out."""
    y, p = read_predictions(a.out)
    ry, rp = read_predictions(a.reference)
    with open(a.metrics) as f:
        m = json.load(f)
    fails = []
    if len(y) != len(ry) or (y != ry).any():
        fails.append(f"labels differ ({len(y)} against {len(ry)} samples)")
    else:
        d = float(np.abs(p - rp).max())
        print(f"predictions: {len(p)} samples, max |shardrec - pytorch float64| {d:.3e} "
              f"(tolerance {a.atol:g})")
        if not d <= a.atol:
            fails.append(f"predictions differ by {d:.3e}")
    mine = metrics_of(y, p)
    for k, v in mine.items():
        rel = abs(m[k] - v) / max(abs(v), 1e-30)
        print(f"{k}: shardrec {m[k]:.12g}, recomputed {v:.12g} (relative {rel:.2e})")
        if not rel <= a.rtol:
            fails.append(f"{k} {m[k]!r} against {v!r}")
    if fails:
        sys.exit("check-eval: FAIL: " + "; ".join(fails))
    print("check-eval: ok")


def read_losses(path):
    with open(path) as f:
        return {int(j["step"]): float(j["loss"]) for j in map(json.loads, filter(str.strip, f))}


def cmd_compare_losses(a):
    x, y = read_losses(a.a), read_losses(a.b)
    steps = range(1, a.steps + 1)
    missing = [s for s in steps if s not in x or s not in y]
    if missing:
        refuse(f"compare-losses: step {missing[0]} is missing from one file (need 1..{a.steps} in both)")
    rel = [abs(x[s] - y[s]) / max(abs(y[s]), 1e-30) for s in steps]
    worst = max(range(len(rel)), key=rel.__getitem__)
    ok = rel[worst] <= a.rtol
    print(f"losses over {a.steps} steps: max relative difference {rel[worst]:.3e} at step {worst + 1} "
          f"({x[worst + 1]:.8f} vs {y[worst + 1]:.8f}); tolerance {a.rtol:g}: {'ok' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


def cmd_compare_weights(a):
    (x, mx), (y, my) = st_read(a.a), st_read(a.b)
    if sorted(x) != sorted(y):
        sys.exit(f"compare-weights: tensor names differ: {sorted(set(x) ^ set(y))}")
    # the same values pooled another way are another model: a table without a record pools by sum
    px, py = read_pooling(a.a, mx, x), read_pooling(a.b, my, y)
    tables = sorted(set(px) | set(py), key=natural_key)
    pooled = [f"{t} {px.get(t, 'sum')} vs {py.get(t, 'sum')}" for t in tables
              if px.get(t, "sum") != py.get(t, "sum")]
    if pooled:
        print(f"weights: pooling differs: {', '.join(pooled[:5])}: FAIL")
        sys.exit(1)
    bad, worst_abs, worst_ratio = [], 0.0, 0.0
    for name in sorted(x):
        if x[name].shape != y[name].shape:
            sys.exit(f"compare-weights: {name} has shapes {list(x[name].shape)} and {list(y[name].shape)}")
        d = np.abs(x[name].astype(np.float64) - y[name])
        if d.size:
            worst_abs = max(worst_abs, float(d.max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                r = d / (a.atol + a.rtol * np.abs(y[name]))
            r[d == 0] = 0  # 0/0 when both tolerances are 0
            worst_ratio = max(worst_ratio, float(r.max()))
        # as torch.allclose: |a - b| <= atol + rtol * |b|, elementwise
        if not np.allclose(x[name], y[name], rtol=a.rtol, atol=a.atol):
            bad.append(name)
    print(f"weights: {len(x)} tensors, max |a-b| {worst_abs:.3e}, max |a-b|/(atol+rtol|b|) "
          f"{worst_ratio:.3f}; allclose(rtol={a.rtol:g}, atol={a.atol:g}): "
          f"{'ok' if not bad else 'FAIL in ' + ', '.join(bad[:5])}")
    sys.exit(0 if not bad else 1)


def cmd_compare_reference(a):
    """Judge a float32 run by a float64 reference and float32 PyTorch runs of it.

    spread = max over the float32 runs of |pt32 - pt64|, per element: how far float32
    rounding alone carries that weight (run several, e.g. train --jitter, so that the
    spread is not one lucky draw). Every element must have
    |sr - pt64| <= factor * spread + floor."""
    sr, ref = st_load(a.a), st_load(a.reference)
    runs = [st_load(p) for p in a.float32_runs]
    for other in runs:
        if sorted(other) != sorted(ref):
            sys.exit(f"compare-reference: tensor names differ: {sorted(set(other) ^ set(ref))}")
    if sorted(sr) != sorted(ref):
        sys.exit(f"compare-reference: tensor names differ: {sorted(set(sr) ^ set(ref))}")
    bad, e_max, s_max, worst, worst_tensor_ratio, worst_tensor = [], 0.0, 0.0, 0.0, 0.0, ""
    for name in sorted(ref):
        r64 = ref[name].astype(np.float64)
        if sr[name].shape != r64.shape or any(x[name].shape != r64.shape for x in runs):
            sys.exit(f"compare-reference: {name} has different shapes")
        if not r64.size:
            continue
        e = np.abs(sr[name] - r64)
        spread = np.max([np.abs(x[name] - r64) for x in runs], axis=0)
        ratio = e / (a.factor * spread + a.floor)
        e_max, s_max = max(e_max, float(e.max())), max(s_max, float(spread.max()))
        if ratio.max() > worst:
            worst, at = float(ratio.max()), np.unravel_index(np.argmax(ratio), ratio.shape)
            worst_at = (f"{name}{list(map(int, at))}: |a-ref| {e[at]:.3e}, "
                        f"spread {spread[at]:.3e}")
        t_ratio = float(e.max()) / max(float(spread.max()), 1e-300)
        if t_ratio > worst_tensor_ratio:
            worst_tensor_ratio, worst_tensor = t_ratio, name
        if ratio.max() > 1:
            bad.append(name)
    print(f"against float64: {len(runs)} float32 PyTorch runs land up to {s_max:.3e} away, "
          f"this run {e_max:.3e}; per tensor max|a-ref| / max spread <= {worst_tensor_ratio:.2f} "
          f"({worst_tensor}); per element |a-ref| / ({a.factor:g} spread + {a.floor:g}) "
          f"<= {worst:.3f} ({worst_at}): {'ok' if not bad else 'FAIL in ' + ', '.join(bad[:5])}")
    sys.exit(0 if not bad else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("init", help="write reference-style initial weights")
    s.add_argument("--out", required=True)
    s.add_argument("--table-rows", required=True, help="R0,R1,..: one table per entry, named t0..")
    s.add_argument("--bot-mlp", default="13-512-256-64-16")
    s.add_argument("--top-mlp", default="512-256-1")
    s.add_argument("--seed", type=int, default=1234)
    s.add_argument("--interaction", choices=["dot", "dcn"], default="dot")
    s.add_argument("--dcn-layers", type=int, default=3)
    s.add_argument("--dcn-rank", type=int, default=512)
    s.add_argument("--pooling", choices=["sum", "mean"], default="sum",
                   help="every table's pooling, recorded in the file (shardrec's --pooling)")
    s.set_defaults(fn=cmd_init)
    s = sub.add_parser("train", help="train on a TSV file from a weights file")
    s.add_argument("--weights", required=True, help="initial weights (shardrec names)")
    s.add_argument("--data", required=True, help="Criteo TSV")
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--batch-size", type=int, required=True)
    s.add_argument("--lr", type=float, default=0.1)
    s.add_argument("--emb-lr", type=float, default=0.0, help="default: --lr")
    s.add_argument("--optimizer", choices=["sgd", "adagrad", "adam"], default="sgd",
                   help="the MLPs' optimizer (torch.optim, PyTorch's defaults)")
    s.add_argument("--emb-optimizer", default="sgd",
                   choices=["sgd", "adagrad", "rowwise_adagrad", "adam", "sparse_adam"],
                   help="the tables' optimizer (see the module docstring)")
    s.add_argument("--tables", help="table order (default: natural order of names)")
    s.add_argument("--losses", help="write one JSON line per step: step, loss")
    s.add_argument("--save", help="write the final weights (shardrec names)")
    s.add_argument("--perturb", help="NAME:FLAT_INDEX:DELTA added to one initial weight")
    s.add_argument("--jitter", type=int, metavar="SEED",
                   help="move each initial weight by -1, 0 or +1 ulp, drawn from SEED")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="float64: the same model, data, initial weights and optimizers in "
                        "float64, final weights saved as F64 (a reference for the float32 runs)")
    s.set_defaults(fn=cmd_train)
    s = sub.add_parser("convert", help="rename tensors shardrec <-> reference (see cmd_convert)")
    s.add_argument("--to", choices=["reference", "shardrec"], required=True)
    s.add_argument("--tables", help="table names in reference order (default t0..)")
    s.add_argument("input")
    s.add_argument("output")
    s.set_defaults(fn=cmd_convert)
    s = sub.add_parser("list", help="print a safetensors file's tensors and pooling records")
    s.add_argument("file")
    s.set_defaults(fn=cmd_list)
    s = sub.add_parser("compare-losses", help="per-step losses of two runs")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--rtol", type=float, default=1e-4)
    s.set_defaults(fn=cmd_compare_losses)
    s = sub.add_parser("compare-weights", help="two weights files, allclose per tensor")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--rtol", type=float, default=1e-4)
    s.add_argument("--atol", type=float, default=1e-6)
    s.set_defaults(fn=cmd_compare_weights)
    s = sub.add_parser("compare-reference",
                       help="a run against a float64 run, measured by float32 runs' spread")
    s.add_argument("a", help="the run to judge (F32)")
    s.add_argument("reference", help="train --dtype float64's final weights")
    s.add_argument("float32_runs", nargs="+", metavar="float32_run",
                   help="float32 PyTorch runs of the same problem (e.g. --jitter 1, 2, ..)")
    s.add_argument("--factor", type=float, default=2.0)
    s.add_argument("--floor", type=float, default=1e-6)
    s.set_defaults(fn=cmd_compare_reference)
    s = sub.add_parser("predict", help="a data file's probabilities in float64 from a weights file")
    s.add_argument("--weights", required=True,
                   help="weights (shardrec names; each table pools as the file records, else sum)")
    s.add_argument("--data", required=True, help="Criteo TSV, or shardrec binary (multi-hot too)")
    s.add_argument("--out", required=True, help="one line a sample: label, tab, probability")
    s.add_argument("--tables", help="table order (default: natural order of names)")
    s.set_defaults(fn=cmd_predict)
    s = sub.add_parser("check-eval", help="shardrec eval's outputs against predict's")
    s.add_argument("--out", required=True, help="shardrec eval --out")
    s.add_argument("--metrics", required=True, help="shardrec eval --metrics")
    s.add_argument("--reference", required=True, help="predict --out")
    s.add_argument("--atol", type=float, default=1e-5, help="predictions' tolerance")
    s.add_argument("--rtol", type=float, default=1e-9, help="metrics' relative tolerance")
    s.set_defaults(fn=cmd_check_eval)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
