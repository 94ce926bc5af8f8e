#!/bin/sh
# `shardrec convert --npy`: TorchRec's preprocessed Criteo days (PREFIX_dense,
# _sparse, _labels .npy) into the binary format, against the TSV path as the
# independent reference (tests/helpers/npy_days.py writes each day both ways,
# numpy computing the dense transform and TorchRec's id hashing):
#
#   - two days of one-hot samples: the file --npy writes is byte for byte the
#     one `convert` writes from the days' TSV (also with 300-sample chunks);
#   - ids as TorchRec stores hex ids past 2^31 (negative int32): reduced as
#     numpy's `%` (floor modulo), byte for byte the TSV of those ids;
#   - MLPerf's multi-hot days (PREFIX_sparse_multi_hot.npz, bags of 1-5 ids,
#     negative ids): the file read back with numpy from the format's
#     description (tests/helpers/binfmt_read.py) holds numpy's `bag % rows`,
#     the dense features and labels; zip64 records (an end record, and the
#     central directory's extra fields, as archives past 4 GiB carry) read the
#     same; a missing member, a compressed archive, a prefix with no sparse
#     array and one with both are refused;
#   - Fortran order and bool labels give the C-order file;
#   - a write that fails (a file size limit) is exit status 1, no file left;
#   - --progress ends at 100% of the arrays' bytes;
#   - refused with exit status 2, naming the file: a missing array, another
#     number of features, days of different lengths, float64 dense,
#     big-endian ids, a truncated array, a label of 2, a NaN dense
#     value, -o naming one of the arrays; and no output is left behind.
# Needs numpy (Debian: python3-numpy, which python3-torch brings); without it
# exit 77.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_numpy
R=50,7,300,1000,60,5
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
cd "$tmp" || exit 1
gen() { "$sr_python" "$sr_tests/helpers/npy_days.py" "$@"; }

mkdir a neg
gen a $R 2 1000 || { echo "FAIL npy_days.py"; exit 1; }
for chunk in 65536 300; do
    why=""
    "$bin" convert a/day_0.tsv a/day_1.tsv -o tsv.bin --table-rows $R --chunk-samples $chunk \
        >t.out 2>&1 || why="TSV convert: $(tail -1 t.out);"
    "$bin" convert --npy a/day_0 a/day_1 -o npy.bin --table-rows $R --chunk-samples $chunk \
        >n.out 2>&1 || why="$why --npy convert: $(tail -1 n.out);"
    grep -q "convert: 2000 samples" n.out || why="$why not 2000 samples;"
    cmp -s tsv.bin npy.bin || why="$why the files differ;"
    if [ -z "$why" ]; then ok "2 days, chunks of $chunk: --npy = TSV, byte for byte"; else bad "2 days" "$why"; fi
done

why=""
gen neg $R 1 700 --negative || why="npy_days.py --negative failed;"
"$bin" convert neg/day_0.tsv -o tsv.bin --table-rows $R >t.out 2>&1 || why="$why TSV: $(tail -1 t.out);"
"$bin" convert --npy neg/day_0 -o npy.bin --table-rows $R >n.out 2>&1 || why="$why --npy: $(tail -1 n.out);"
cmp -s tsv.bin npy.bin || why="$why the files differ;"
"$sr_python" -c "import numpy as np, sys; sys.exit(0 if (np.load('neg/day_0_sparse.npy') < 0).any() else 1)" ||
    why="$why no negative id drawn;"
if [ -z "$why" ]; then ok "negative int32 ids: numpy's floor modulo"; else bad "negative ids" "$why"; fi

total=$(cat a/day_0_*.npy a/day_1_*.npy | wc -c | awk '{ printf "%.1f", $1 / 1e6 }')
if "$bin" convert --npy a/day_0 a/day_1 -o npy.bin --table-rows $R --progress >p.out 2>&1 &&
    grep -q "$total of $total MB read (100%), 2000 samples" p.out; then
    ok "--progress ends at 100%"
else
    bad "--progress" "$(tr '\r' '\n' <p.out | tail -2)"
fi

# damaged days: each from a copy of day 0, one array changed
damage() { # NAME PYTHON-STATEMENTS (d: the folder; np: numpy)
    rm -rf "$1" && mkdir "$1" && cp a/day_0_*.npy "$1/"
    "$sr_python" -c "import numpy as np; d = '$1'; $2"
}
refuse() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    rm -f out.bin
    "$bin" convert "$@" >r.out 2>&1
    st=$?
    if [ $st -eq 2 ] && grep -q -- "$pat" r.out && [ ! -e out.bin ]; then
        ok "refuses $name"
    else
        bad "refuses $name" "exit $st: $(tail -1 r.out)"
    fi
}
damage nolabels "import os; os.remove(d + '/day_0_labels.npy')"
refuse "a missing array" "nolabels/day_0_labels.npy" --npy nolabels/day_0 -o out.bin --table-rows $R
refuse "another number of features" "day_0_sparse.npy: int32 of shape (1000, 6)" \
    --npy a/day_0 -o out.bin --table-rows 50,7,300,1000,60
damage short "np.save(d + '/day_0_labels.npy', np.load(d + '/day_0_labels.npy')[:999])"
refuse "arrays of different lengths" "day_0_labels.npy holds 999 samples" --npy short/day_0 -o out.bin --table-rows $R
damage f64 "np.save(d + '/day_0_dense.npy', np.load(d + '/day_0_dense.npy').astype(np.float64))"
refuse "float64 dense" "float64 of shape (1000, 13); expected float32" --npy f64/day_0 -o out.bin --table-rows $R
damage both "np.savez(d + '/day_0_sparse_multi_hot.npz', **{'0': np.zeros((1000, 2), np.int32)})"
refuse "both sparse arrays" "both both/day_0_sparse.npy and both/day_0_sparse_multi_hot.npz exist" \
    --npy both/day_0 -o out.bin --table-rows $R
# Fortran order (np.save of a transposed array), labels as bool: the same file
damage fortran "np.save(d + '/day_0_dense.npy', np.asfortranarray(np.load(d + '/day_0_dense.npy')));
np.save(d + '/day_0_sparse.npy', np.load(d + '/day_0_sparse.npy').T.copy().T);
np.save(d + '/day_0_labels.npy', np.load(d + '/day_0_labels.npy').astype(bool))"
"$bin" convert --npy a/day_0 -o c.bin --table-rows $R >/dev/null 2>&1
if "$bin" convert --npy fortran/day_0 -o f.bin --table-rows $R >f.out 2>&1 && cmp -s c.bin f.bin &&
    "$sr_python" -c "import numpy as np; assert np.load('fortran/day_0_sparse.npy').flags.f_contiguous"; then
    ok "Fortran order and bool labels read as C order and int labels"
else
    bad "Fortran order" "$(tail -1 f.out)"
fi
damage big "np.save(d + '/day_0_sparse.npy', np.load(d + '/day_0_sparse.npy').astype('>i4'))"
refuse "big-endian ids" "dtype '>i4'" --npy big/day_0 -o out.bin --table-rows $R
damage cut "b = open(d + '/day_0_sparse.npy', 'rb').read(); open(d + '/day_0_sparse.npy', 'wb').write(b[:-5])"
refuse "a truncated array" "truncated or damaged" --npy cut/day_0 -o out.bin --table-rows $R
damage label2 "y = np.load(d + '/day_0_labels.npy'); y[17] = 2; np.save(d + '/day_0_labels.npy', y)"
refuse "a label of 2" "sample 17: label 2" --npy label2/day_0 -o out.bin --table-rows $R
damage nan "x = np.load(d + '/day_0_dense.npy'); x[5, 3] = np.nan; np.save(d + '/day_0_dense.npy', x)"
refuse "a NaN dense value" "sample 5, column 3" --npy nan/day_0 -o out.bin --table-rows $R
cp a/day_0_labels.npy labels.keep
refuse "-o naming an input" "day_0_labels.npy" --npy a/day_0 -o a/day_0_labels.npy --table-rows $R
cmp -s a/day_0_labels.npy labels.keep || bad "-o naming an input" "the input was changed"
# a write that fails (a full disk, as a file size limit): exit status 1, no file
{ (trap '' XFSZ; ulimit -f 8; exec "$bin" convert --npy a/day_0 a/day_1 -o full.bin --table-rows $R) 2>&1
    echo $? >rc; } | cat >w.out
if [ "$(cat rc)" -eq 1 ] && grep -q "full.bin.*write failed" w.out && [ ! -e full.bin ]; then
    ok "a failed write: exit status 1, no file"
else
    bad "a failed write" "exit $(cat rc): $(tail -1 w.out)"
fi
ls -a . | grep -q 'sr-tmp' && bad "temporary files" "$(ls -a . | grep sr-tmp)"

# MLPerf's multi-hot days: against the file read back from its format's
# description (tests/helpers/binfmt_read.py), ids = numpy's `bag % rows`
why=""
mkdir mh
gen mh $R 2 900 --negative --multi-hot 3,1,2,5,1,4 || why="npy_days.py --multi-hot failed;"
"$bin" convert --npy mh/day_0 mh/day_1 -o mh.bin --table-rows $R --chunk-samples 500 >m.out 2>&1 ||
    why="$why convert: $(tail -1 m.out);"
[ -z "$why" ] && { out=$("$sr_python" - "$sr_tests/helpers" $R <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import binfmt_read
rows = [int(r) for r in sys.argv[2].split(",")]
dense, labels, bags = binfmt_read.read("mh.bin")
want_dense = np.concatenate([np.load(f"mh/day_{d}_dense.npy") for d in (0, 1)])
want_labels = np.concatenate([np.load(f"mh/day_{d}_labels.npy").reshape(-1) for d in (0, 1)])
bad = []
if not (dense == want_dense).all() or not (labels == want_labels).all():
    bad.append("dense or labels")
for f, r in enumerate(rows):
    z = np.concatenate([np.load(f"mh/day_{d}_sparse_multi_hot.npz")[str(f)] for d in (0, 1)])
    want = z.astype(np.int64) % r
    got = np.array([list(b) for b in bags[f]], dtype=np.int64)
    if got.shape != want.shape or not (got == want).all():
        bad.append(f"feature {f}")
print(f"{len(labels)} samples, {sum(b[0].size for b in bags)} ids a sample" +
      (": FAIL " + ", ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
PY
) || why="$why $out;"; }
if [ -z "$why" ]; then ok "multi-hot .npz: $out, as numpy reduces them"; else bad "multi-hot" "$why"; fi
damage_mh() { rm -rf mhc && mkdir mhc && cp mh/day_0_*.np? mhc/ && "$sr_python" -c "import numpy as np; d = 'mhc'; $1"; }
damage_mh "z = dict(np.load(d + '/day_0_sparse_multi_hot.npz')); del z['4']; np.savez(d + '/day_0_sparse_multi_hot.npz', **z)"
refuse "a missing multi-hot member" "no member '4.npy'" --npy mhc/day_0 -o out.bin --table-rows $R
damage_mh "z = dict(np.load(d + '/day_0_sparse_multi_hot.npz')); np.savez_compressed(d + '/day_0_sparse_multi_hot.npz', **z)"
refuse "a compressed .npz" "compressed (np.savez_compressed)" --npy mhc/day_0 -o out.bin --table-rows $R
damage_mh "import os; os.remove(d + '/day_0_sparse_multi_hot.npz')"
refuse "no sparse array at all" "neither mhc/day_0_sparse.npy nor mhc/day_0_sparse_multi_hot.npz" \
    --npy mhc/day_0 -o out.bin --table-rows $R
"$bin" convert --npy mh/day_1 -o plain.bin --table-rows $R >/dev/null 2>&1
for kind in end central; do
    rm -rf z64 && mkdir z64 && cp mh/day_1_dense.npy mh/day_1_labels.npy z64/
    "$sr_python" "$sr_tests/helpers/npz_zip64.py" $kind mh/day_1_sparse_multi_hot.npz \
        z64/day_1_sparse_multi_hot.npz
    if "$bin" convert --npy z64/day_1 -o z64.bin --table-rows $R >z.out 2>&1 && cmp -s z64.bin plain.bin; then
        ok "zip64 ($kind records) reads as the plain archive"
    else
        bad "zip64 ($kind)" "$(tail -1 z.out)"
    fi
done


echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
