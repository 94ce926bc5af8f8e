#!/bin/sh
# No include points up DESIGN.md's layer order:
#
#   core < device < comm < data < plan < embed < model < train < cli
#
# Every file under src/, cli/ and include/shardrec/ belongs to a layer:
# src/LAYER/... to LAYER, cli/ to cli, and a public header
# include/shardrec/X.h to the layer whose src/ folder implements it (the
# table below). Every `#include "..."` of those files is resolved as the
# compiler does (the including file's folder, then include/, then src/) and
# must name a file of the same or a lower layer. Fails, naming file:line and
# both layers, on an include of a higher layer, on an include it cannot
# resolve, on a public header missing from the table, and on a table entry
# that the code contradicts: a function a header declares that is defined
# under the src/ folder of another layer.
#
# SR_LAYERS_ROOT=DIR checks the tree at DIR instead of this repository's.
. "$(dirname "$0")/lib.sh"
top=${SR_LAYERS_ROOT:-$sr_root}
cd "$top" || exit 1

# The public headers' layers: the src/ folder that defines their functions
# (for headers of types only, the lowest layer whose code uses them).
headers="
alloc core
atomic_file core
fault core
clock core
error core
half core
kjt core
log core
nearest core
optim core
rng core
safetensors core
files core
stream core
table_config core
tensor core
trace core
device device
comm comm
comm_compressed comm
batch data
binfmt data
npy data
npy_criteo data
npz data
criteo data
reader data
synthetic data
plan plan
topology plan
planner plan
table_stats plan
ebc embed
sharded_ebc embed
dense_optim model
dlrm model
lr_schedule model
metrics train
checkpoint train
train_config train
trainer train
weights_io train
"

echo "$headers" | grep . >"$tmp/table"
find src cli include/shardrec -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' \) | sort >"$tmp/files"
[ -s "$tmp/files" ] || { echo "check_layers: no sources under $top"; exit 1; }

awk -v order="core device comm data plan embed model train cli" '
function layer_of(path,    a, base) {
    if (path ~ /^cli\//)
        return "cli"
    if (path ~ /^src\//) {
        split(path, a, "/")
        return (a[2] in rank) ? a[2] : ""
    }
    if (path ~ /^include\/shardrec\//) {
        base = path
        sub(/^include\/shardrec\//, "", base)
        sub(/\.h$/, "", base)
        return (base in header) ? header[base] : ""
    }
    return ""
}
function exists(path,    line, r) {
    if (!(path in known)) {
        r = (getline line < path)
        known[path] = r >= 0
        close(path)
    }
    return known[path]
}
function clean(path,    a, n, i, k, st, out) { # "a/./b/../c" -> "a/c"
    n = split(path, a, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (a[i] == "." || a[i] == "")
            continue
        if (a[i] == ".." && k > 0 && st[k] != "..")
            k--
        else
            st[++k] = a[i]
    }
    out = ""
    for (i = 1; i <= k; i++)
        out = out (i > 1 ? "/" : "") st[i]
    return out
}
function resolve(from, inc,    dir) { # as -Iinclude -Isrc, after the includer'"'"'s folder
    dir = from
    sub(/\/[^\/]*$/, "", dir)
    if (exists(clean(dir "/" inc)))
        return clean(dir "/" inc)
    if (exists(clean("include/" inc)))
        return clean("include/" inc)
    if (exists(clean("src/" inc)))
        return clean("src/" inc)
    return ""
}
function fn_name(line,    name) { # the sr_ function a declaration or definition line names
    name = line
    sub(/\(.*$/, "", name)
    sub(/^.*[^a-z0-9_]/, "", name)
    return name ~ /^sr_/ ? name : ""
}
BEGIN {
    n = split(order, o, " ")
    for (i = 1; i <= n; i++)
        rank[o[i]] = i
}
FNR == NR { header[$1] = $2; next }
{
    f = $0
    nfiles++
    lf = layer_of(f)
    if (lf == "") {
        print f ": in no layer (a public header missing from the table in tests/check_layers.sh?)"
        bad++
        next
    }
    lineno = 0
    while ((getline line < f) > 0) {
        lineno++
        if (line ~ /^[ \t]*#[ \t]*include[ \t]*"/) {
            ninc++
            inc = line
            sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
            sub(/".*$/, "", inc)
            target = resolve(f, inc)
            lt = target == "" ? "" : layer_of(target)
            if (target == "") {
                print f ":" lineno ": includes \"" inc "\", which is no file of this tree"
                bad++
            } else if (lt == "") {
                print f ":" lineno ": includes " target ", which is in no layer"
                bad++
            } else if (rank[lt] > rank[lf]) {
                print f ":" lineno ": " lf " includes " lt " (" target ")"
                bad++
            }
        }
        # definitions (.c/.cu, at column 0, not static, not a prototype) and
        # declarations (public headers) of sr_ functions
        if (f ~ /\.(c|cu)$/ && line ~ /^[a-z_].*sr_[a-z0-9_]+\(/ && line !~ /^static/ &&
            line !~ /;[ \t]*$/ && (name = fn_name(line)) != "")
            defined[name] = defined[name] " " lf
        if (f ~ /^include\// && line ~ /^[a-z].*sr_[a-z0-9_]+\(/ && line !~ /^(static|typedef)/ &&
            (name = fn_name(line)) != "") {
            declared[name] = f
            declared_at[name] = lineno
        }
    }
    close(f)
}
END {
    for (name in declared) {
        if (!(name in defined))
            continue
        h = declared[name]
        n = split(defined[name], where, " ")
        for (k = 1; k <= n; k++)
            if (where[k] != layer_of(h)) {
                print h ":" declared_at[name] ": declares " name ", defined in src/" where[k] \
                      "/: the table in tests/check_layers.sh puts this header in " layer_of(h)
                bad++
                break
            }
    }
    printf "check_layers: %d files, %d includes, %d problems\n", nfiles, ninc, bad
    exit bad != 0
}' "$tmp/table" "$tmp/files"
