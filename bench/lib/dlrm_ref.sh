# shellcheck shell=bash
# Helpers shared by the benchmark scripts that run the PyTorch DLRM reference
# (facebookresearch/dlrm, dlrm_s_pytorch.py). Source this file; it defines
# functions only. Nothing here is written into the reference's checkout.

# dlrm_ref_stub DIR: write DIR/sitecustomize.py, which installs do-nothing
# stand-ins for the reference's optional imports. Put DIR first on PYTHONPATH.
# The reference imports torch.utils.tensorboard (whose `tensorboard` package is
# absent on Debian) and sklearn.metrics (used only by its test/MLPerf paths,
# which the benchmark flags never reach). (Debian's own sitecustomize only
# installs apport.)
dlrm_ref_stub() {
    mkdir -p "$1"
    cat >"$1/sitecustomize.py" <<'PYEOF'
# Stand-ins for the DLRM reference's optional imports (written by
# bench/lib/dlrm_ref.sh). They change nothing that the benchmark times.
import sys, types

class SummaryWriter:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

_tb = types.ModuleType("torch.utils.tensorboard")
_tb.SummaryWriter = SummaryWriter
sys.modules.setdefault("torch.utils.tensorboard", _tb)
try:
    import sklearn.metrics  # noqa: F401
except ImportError:
    _sk = types.ModuleType("sklearn")
    _skm = types.ModuleType("sklearn.metrics")
    _sk.metrics = _skm
    sys.modules["sklearn"] = _sk
    sys.modules["sklearn.metrics"] = _skm
PYEOF
}

# dlrm_ref_patched_copy SRC DST FASTGEN: copy the reference's tree (no .git) from
# the checkout SRC into the scratch folder DST (made fresh; never inside a
# repository) and patch the copy:
#  - a barrier (ext_dist.barrier(), a no-op in a world of 1) just before the
#    per-iteration timer starts, so its ms/it is the step itself and not the
#    wait for the slowest rank's batch generation (BENCH.md);
#  - with FASTGEN=1, a vectorised generate_dist_input_batch for the one case
#    the benchmarks use (uniform ids, a fixed 1 id per lookup). It consumes the
#    same numpy stream in the same order (n draws of ra.random(1) == one
#    ra.random(n) for the legacy RandomState), so batches are identical; only
#    the untimed generation gets faster (the Python loop costs ~24 us per
#    sample per table, i.e. seconds per batch when every rank draws the global
#    batch). Other cases fall through to the original function.
# Fails (returns 1) if the line it patches is not found exactly once.
dlrm_ref_patched_copy() {
    local src=$1 dst=$2 fastgen=${3:-1}
    rm -rf "$dst" && mkdir -p "$dst" || return 1
    (cd "$src" && tar --exclude=.git -cf - .) | (cd "$dst" && tar -xf -) || return 1
    local line='                        t1 = time_wrap(use_gpu)'
    [ "$(grep -cxF "$line" "$dst/dlrm_s_pytorch.py")" = 1 ] || {
        echo "dlrm_ref_patched_copy: timer line not found exactly once in $src/dlrm_s_pytorch.py" >&2
        return 1
    }
    "${PYTHON:-python3}" - "$dst/dlrm_s_pytorch.py" "$line" <<'PYEOF' || return 1
import sys
path, line = sys.argv[1], sys.argv[2]
text = open(path).read()
indent = line[: len(line) - len(line.lstrip())]
text = text.replace(line + "\n", indent + "ext_dist.barrier()  # added by shardrec bench\n" + line + "\n", 1)
open(path, "w").write(text)
PYEOF
    if [ "$fastgen" = 1 ]; then
        grep -q '^def generate_dist_input_batch(' "$dst/dlrm_data_pytorch.py" || {
            echo "dlrm_ref_patched_copy: generate_dist_input_batch not found in $src/dlrm_data_pytorch.py" >&2
            return 1
        }
        cat >>"$dst/dlrm_data_pytorch.py" <<'PYEOF'


# --- added by shardrec's bench/lib/dlrm_ref.sh (scratch copy only) ---
_orig_generate_dist_input_batch = generate_dist_input_batch


def generate_dist_input_batch(m_den, ln_emb, n, num_indices_per_lookup,
                              num_indices_per_lookup_fixed, rand_data_dist,
                              *args, **kwargs):
    if not (num_indices_per_lookup_fixed and int(num_indices_per_lookup) == 1
            and rand_data_dist == "uniform"):
        return _orig_generate_dist_input_batch(
            m_den, ln_emb, n, num_indices_per_lookup,
            num_indices_per_lookup_fixed, rand_data_dist, *args, **kwargs)
    Xt = torch.tensor(ra.rand(n, m_den).astype(np.float32))
    offs, idxs = [], []
    for size in ln_emb:
        r = ra.random(n)
        idxs.append(torch.tensor(np.round(r * (size - 1)).astype(np.int64)))
        offs.append(torch.arange(n, dtype=torch.int64))
    return (Xt, offs, idxs)
PYEOF
    fi
}
