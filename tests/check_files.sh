#!/bin/sh
# Files in and out of the command-line tool (issue 7, items 2 and 4):
# - damaged gzip data (cut at a line boundary, inside a line, trailing garbage)
#   stops `train` and `convert` with exit status 2 and a message naming the file
#   (also under --skip-bad-lines); concatenated members are read whole;
# - output paths of train (--save-weights, --metrics), convert (-o) and gen
#   (--out) are checked before any work: a directory, a missing folder, no
#   permission each give a one-line error with exit status 2, at once;
# - convert --progress ends having read every byte of plain, gzip and binary
#   inputs; --no-progress prints none;
# - a failed convert leaves the old output and no temporary file; a symbolic
#   link at an output is replaced, the file it points to untouched;
# - (issue 19, item 5) an output that is an input (by identity: the same
#   name, another path, a hard link) or another output stops the command with
#   exit status 2 before anything is written, and the input is intact;
# - a failed write of --metrics (/dev/full, a full disk: here a file size
#   limit) or --trace is exit status 1 naming the file and the reason; the
#   weights are still saved; so is one of gen's, plan's, export's or eval's
#   --out;
# - a FIFO as --data, --plan, --config or --init-weights, and /dev/zero as
#   --plan or --config, are refused at once (exit 2), never waited on or read
#   without end.
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
# --progress: the last line has read every input byte (plain, gzip, binary)
total=$(cat "$tmp/d.tsv" "$tmp/cat.gz" "$tmp/d.bin" | wc -c | awk '{ printf "%.1f", $1 / 1e6 }')
expect 0 "$total of $total MB read (100%), 6000 samples" -- convert "$tmp/d.tsv" "$tmp/cat.gz" \
    "$tmp/d.bin" -o "$tmp/m.bin" $small --progress
expect 0 "" -- convert "$tmp/d.tsv" -o "$tmp/m.bin" $small --no-progress
grep -q "MB read" "$tmp/err" && { echo "FAIL: convert --no-progress printed progress"; fail=1; }
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
# ---- an output never names an input (issue 19, item 5) -----------------------------------
job="--embedding-dim 8 --bot-mlp 13-8 --top-mlp 8-1 --batch-size 64 --eval-samples 0 --no-progress $small"
cp "$tmp/d.tsv" "$tmp/v.tsv"
cp "$tmp/d.tsv" "$tmp/keep.tsv"
ln "$tmp/v.tsv" "$tmp/hard.tsv"
printf '{"steps": 2}' >"$tmp/c.json"
"$bin" train $job --steps 2 --save-weights "$tmp/w.st" >/dev/null 2>&1 || { echo "FAIL: save"; fail=1; }
cp "$tmp/w.st" "$tmp/w_keep.st"
for out in --metrics --save-weights --trace; do
    expect 2 "$out $tmp/v.tsv is the file that --data $tmp/v.tsv reads" -- \
        train $job --steps 2 $out "$tmp/v.tsv" --data "$tmp/v.tsv"
    expect 2 "$out $tmp/hard.tsv is the file that --data $tmp/v.tsv reads (under another" -- \
        train $job --steps 2 $out "$tmp/hard.tsv" --data "$tmp/v.tsv"
    expect 2 "$out $tmp/v.tsv is the file that --eval-data $tmp/./v.tsv reads" -- \
        train $job --steps 2 --data "$tmp/d.tsv" --eval-data "$tmp/./v.tsv" $out "$tmp/v.tsv"
    expect 2 "$out $tmp/w.st is the file that --init-weights $tmp/w.st reads" -- \
        train $job --steps 2 --init-weights "$tmp/w.st" $out "$tmp/w.st"
    expect 2 "$out $tmp/c.json is the file that --config $tmp/c.json reads" -- \
        train $job --config "$tmp/c.json" $out "$tmp/c.json"
done
expect 2 "is the file that --plan $tmp/c.json reads" -- train $job --plan "$tmp/c.json" --trace "$tmp/c.json"
cmp -s "$tmp/v.tsv" "$tmp/keep.tsv" || { echo "FAIL: an output flag changed the --data file"; fail=1; }
cmp -s "$tmp/w.st" "$tmp/w_keep.st" || { echo "FAIL: an output flag changed the weights"; fail=1; }
[ "$(cat "$tmp/c.json")" = '{"steps": 2}' ] || { echo "FAIL: an output flag changed the config"; fail=1; }
# two outputs on one file, also one not there yet under two spellings
mkdir "$tmp/sub"
expect 2 "--metrics $tmp/m.json and --trace $tmp/sub/../m.json are the same file" -- \
    train $job --steps 2 --metrics "$tmp/m.json" --trace "$tmp/sub/../m.json"
expect 2 "--save-weights $tmp/v.tsv and --metrics $tmp/v.tsv are the same file" -- \
    train $job --steps 2 --metrics "$tmp/v.tsv" --save-weights "$tmp/v.tsv"
[ -e "$tmp/m.json" ] && { echo "FAIL: a clashing output was created"; fail=1; }
expect 2 "-o $tmp/hard.tsv is the file that" -- convert "$tmp/v.tsv" -o "$tmp/hard.tsv" $small
expect 2 "--out $tmp/c.json is the file that --config $tmp/c.json reads" -- \
    gen --config "$tmp/c.json" --out "$tmp/c.json" --samples 10
cmp -s "$tmp/v.tsv" "$tmp/keep.tsv" || { echo "FAIL: convert -o changed its input"; fail=1; }
expect 2 "empty path" -- train $job --steps 2 --metrics ''
expect 2 "empty path" -- train $job --steps 2 --trace ''

# ---- a result that cannot be written: exit status 1, the file and the reason -----------
running=1
expect 1 "--metrics /dev/full: cannot write (No space left on device)" -- \
    train $job --steps 3 --metrics /dev/full --save-weights "$tmp/w_full.st"
[ -s "$tmp/w_full.st" ] || { echo "FAIL: no weights saved after a failed --metrics"; fail=1; }
tail -n 1 "$tmp/err" | grep -q "^shardrec train: --metrics /dev/full" ||
    { echo "FAIL: the metrics error is not the last line"; tail -n 3 "$tmp/err"; fail=1; }
running=""
# a full disk, as a file size limit (SIGXFSZ ignored: writes fail with EFBIG);
# the output goes through a pipe, which the limit does not cut
limited() { # limited ARGS...: shardrec under a 1 KiB file size limit; status in $got
    { (trap '' XFSZ; ulimit -f 2; exec "$bin" "$@") 2>&1; echo $? >"$tmp/rc"; } | cat >"$tmp/err"
    got=$(cat "$tmp/rc")
}
limited train $job --steps 40 --log-every 1 --metrics "$tmp/lim.jsonl"
if [ "$got" -ne 1 ] || ! tail -n 1 "$tmp/err" | grep -q "^shardrec train: --metrics $tmp/lim.jsonl: cannot write (File too large)"; then
    echo "FAIL: --metrics on a full disk: exit $got"; tail -n 3 "$tmp/err"; fail=1
fi
limited train $job --steps 10 --trace "$tmp/lim.json"
if [ "$got" -ne 1 ] || ! tail -n 1 "$tmp/err" | grep -q "^shardrec train: --trace: $tmp/lim.json: cannot write (File too large)"; then
    echo "FAIL: --trace on a full disk: exit $got"; tail -n 3 "$tmp/err"; fail=1
fi
[ -e "$tmp/lim.json" ] && { echo "FAIL: a failed --trace left a file"; fail=1; }
# gen, plan and export on a full disk: exit status 1 (the command was right), the file and the reason
"$bin" train $job --steps 2 --checkpoint-dir "$tmp/lim_ck" >/dev/null 2>&1 || { echo "FAIL: checkpoint"; fail=1; }
ev="eval $tmp/lim_ck --embedding-dim 8 --bot-mlp 13-8 --top-mlp 8-1 $small --eval-samples 2000"
for args in "gen $small --samples 2000 --out" "plan $small --topology cpu-2core --out" \
    "export $tmp/lim_ck --out" "$ev --out"; do
    # shellcheck disable=SC2086
    limited $args "$tmp/lim.out"
    if [ "$got" -ne 1 ] || ! grep -q "shardrec ${args%% *}: .*$tmp/lim.out.*File too large" "$tmp/err"; then
        echo "FAIL: $args on a full disk: exit $got"; tail -n 3 "$tmp/err"; fail=1
    fi
    [ -e "$tmp/lim.out" ] && { echo "FAIL: a failed ${args%% *} left a file"; fail=1; }
done
no_temporaries "$tmp"

# ---- inputs that are not regular files: refused at once, never waited on --------------
mkfifo "$tmp/fifo"
expect 2 "$tmp/fifo: not a regular file but a FIFO" -- train $job --steps 2 --data "$tmp/fifo"
expect 2 "$tmp/fifo: not a regular file but a FIFO" -- train $job --steps 2 --data "$tmp/d.tsv" --eval-data "$tmp/fifo"
expect 2 "$tmp/fifo: cannot read the plan (not a regular file but a FIFO" -- train $job --steps 2 --plan "$tmp/fifo"
expect 2 "$tmp/fifo: cannot read config file (not a regular file but a FIFO" -- train $job --config "$tmp/fifo"
running=1 # the weights are loaded after the job line
expect 2 "$tmp/fifo: not a regular file" -- train $job --steps 2 --init-weights "$tmp/fifo"
running=""
expect 2 "/dev/zero: cannot read the plan (not a regular file but a device)" -- train $job --steps 2 --plan /dev/zero
expect 2 "/dev/zero: cannot read config file (not a regular file but a device)" -- train $job --config /dev/zero
exit $fail
