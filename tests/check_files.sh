#!/bin/sh
# Files in and out of the command-line tool (issue 7, items 2 and 4):
# - damaged gzip data (cut at a line boundary, inside a line, trailing garbage)
#   stops `train` and `convert` with exit status 2 and a message naming the file
#   (also under --skip-bad-lines); concatenated members are read whole;
# - output paths of train (--save-weights, --metrics), convert (-o) and gen
#   (--out) are checked before any work: a directory, a missing folder, no
#   permission each give a one-line error with exit status 2, at once;
# - a failed convert leaves the old output and no temporary file; a symbolic
#   link at an output is replaced, the file it points to untouched.
sr_threads=keep
. "$(dirname "$0")/lib.sh"
sr_on_exit='chmod -R u+w "$tmp" 2>/dev/null'
bin=$sr_shardrec
sr_need_built "$bin"
fail=0

expect() { # expect STATUS PATTERN -- ARGS...
    want=$1; pat=$2; shift 3
    timeout 60 "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: shardrec $* exited $got, expected $want"; cat "$tmp/err"; fail=1; return
    fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
        echo "FAIL: shardrec $*: output lacks '$pat'"; cat "$tmp/err"; fail=1; return
    fi
    if [ "$want" -eq 2 ] && [ -z "$running" ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
        echo "FAIL: shardrec $*: error is not one line"; cat "$tmp/err"; fail=1
    fi
}
running="" # set while a run may print its job line before failing
no_temporaries() { # no_temporaries DIR
    if ls -a "$1" | grep -q 'sr-tmp'; then
        echo "FAIL: temporary files left in $1:"; ls -a "$1"; fail=1
    fi
}

# ---- damaged gzip input ------------------------------------------------------------
small="--table-rows 100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100,100"
"$bin" gen --out "$tmp/d.tsv" --samples 2000 $small >/dev/null 2>&1 || { echo "FAIL: gen"; exit 1; }
gzip -c "$tmp/d.tsv" >"$tmp/d.gz"
size=$(wc -c <"$tmp/d.gz")
head -c $((size - 8)) "$tmp/d.gz" >"$tmp/cut_trailer.gz"     # every line, no trailer
head -c $((size / 2)) "$tmp/d.gz" >"$tmp/cut_half.gz"         # inside a line
cp "$tmp/d.gz" "$tmp/garbage.gz" && printf 'junk\n' >>"$tmp/garbage.gz"
head -n 1000 "$tmp/d.tsv" | gzip -c >"$tmp/cat.gz"
tail -n 1000 "$tmp/d.tsv" | gzip -c >>"$tmp/cat.gz"
running=1
for skip in "" --skip-bad-lines; do
    for f in cut_trailer cut_half; do
        expect 2 "$f.gz.*truncated" -- train --data "$tmp/$f.gz" --batch-size 64 $small $skip
        expect 2 "$f.gz.*truncated" -- convert "$tmp/$f.gz" -o "$tmp/o.bin" $small $skip
    done
    expect 2 "garbage.gz.*trailing garbage" -- train --data "$tmp/garbage.gz" --batch-size 64 $small $skip
done
running=""
[ -e "$tmp/o.bin" ] && { echo "FAIL: a failed convert left o.bin"; fail=1; }
no_temporaries "$tmp"
expect 0 "convert: 2000 samples" -- convert "$tmp/cat.gz" -o "$tmp/cat.bin" $small
expect 0 "convert: 2000 samples" -- convert "$tmp/d.tsv" -o "$tmp/d.bin" $small
cmp -s "$tmp/cat.bin" "$tmp/d.bin" || { echo "FAIL: concatenated gzip members read differently"; fail=1; }

# a failed convert keeps the old output; a link at the output is replaced, not followed
cp "$tmp/d.bin" "$tmp/keep.bin"
expect 2 "truncated" -- convert "$tmp/d.tsv" "$tmp/cut_half.gz" -o "$tmp/d.bin" $small
cmp -s "$tmp/keep.bin" "$tmp/d.bin" || { echo "FAIL: a failed convert changed the old output"; fail=1; }
no_temporaries "$tmp"
echo precious >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/link.bin"
expect 0 "" -- convert "$tmp/d.tsv" -o "$tmp/link.bin" $small
[ "$(cat "$tmp/victim")" = precious ] || { echo "FAIL: convert wrote through a link"; fail=1; }
[ -f "$tmp/link.bin" ] && [ ! -L "$tmp/link.bin" ] || { echo "FAIL: link.bin not replaced"; fail=1; }

# ---- output paths, checked before any work ---------------------------------------------
mkdir "$tmp/adir"
long="--steps 100000000"
for args in "train $long --save-weights" "train $long --metrics" "convert $tmp/d.tsv $small -o" "gen --samples 1000000000 --out"; do
    # shellcheck disable=SC2086
    set -- $args
    expect 2 "is a directory" -- "$@" "$tmp/adir"
    expect 2 "folder $tmp/nope does not exist" -- "$@" "$tmp/nope/x.out"
done
[ -e "$tmp/nope" ] && { echo "FAIL: a missing folder was created"; fail=1; }
expect 2 "not a regular file" -- train $long --save-weights /dev/null

# no permission: as an unprivileged user (nobody, when running as root)
mkdir "$tmp/ro"
chmod 755 "$tmp"
if [ "$(id -u)" -eq 0 ]; then
    as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
    $as_user true 2>/dev/null || as_user="runuser -u nobody --"
else
    as_user=""
    chmod 555 "$tmp/ro"
fi
for args in "train $long --save-weights" "train $long --metrics" "convert $tmp/d.tsv $small -o" "gen --out"; do
    # shellcheck disable=SC2086
    $as_user "$bin" $args "$tmp/ro/x.out" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne 2 ] || ! grep -q "no permission to write in the folder $tmp/ro" "$tmp/err"; then
        echo "FAIL: $args into an unwritable folder: exit $got"; cat "$tmp/err"; fail=1
    fi
done
exit $fail
