#!/usr/bin/env bash
# Brings TorchRec's wheels to the GPU machine a piece a call, for the peers
# stage of bench/gpu.sh. The fbgemm-gpu wheel (465 MB) is larger than one call
# of the device tool carries, so it travels split in 8 pieces
# (split -n 8 -d fbgemm_gpu-*.whl fb., ../shared/peers/README.md) in the
# git-ignored .peers/, one carried with each call:
#
#   bench/peer_wheel_piece.sh N     N in 0..7; carry .peers/fb.0N and .peers/whl
#
# copies .peers/fb.0N to /tmp/fb/ (files under /tmp last while the machine
# stays warm) and the small wheels of .peers/whl/ (torchrec, tensordict,
# iopath, pyvers, orjson, importlib_metadata, zipp) to /tmp/whl/; once all 8
# pieces are in /tmp/fb/, rejoins them into /tmp/whl/ and checks the md5.
# Prints one line of status; exit status 0 while pieces are missing or once
# the wheel checks, 1 on a missing piece N or a wrong md5.
set -uo pipefail
WHEEL=fbgemm_gpu-1.6.0-cp312-cp312-manylinux_2_28_x86_64.whl
MD5=f514e36c824b696aa4feb45e2b12562a
PEERS=${PEERS:-.peers}
n=${1:?usage: bench/peer_wheel_piece.sh N (0..7)}
piece=$PEERS/fb.0$n
[ -f "$piece" ] || { echo "peer wheel: no $piece (carry it with the call)"; exit 1; }
mkdir -p /tmp/fb /tmp/whl
cp "$piece" /tmp/fb/ || { echo "peer wheel: copying $piece to /tmp/fb failed"; exit 1; }
[ -d "$PEERS/whl" ] && cp "$PEERS"/whl/*.whl /tmp/whl/ 2>/dev/null
have=$(ls /tmp/fb/fb.0[0-7] 2>/dev/null | wc -l)
if [ "$have" -lt 8 ]; then
    echo "peer wheel: piece $n copied; $have of 8 in /tmp/fb; $(ls /tmp/whl | wc -l) wheels in /tmp/whl"
    exit 0
fi
cat /tmp/fb/fb.0[0-7] >"/tmp/whl/$WHEEL"
sum=$(md5sum "/tmp/whl/$WHEEL" | cut -d' ' -f1)
if [ "$sum" != "$MD5" ]; then
    echo "peer wheel: /tmp/whl/$WHEEL md5 $sum, expected $MD5 (resend the pieces)"
    rm -f "/tmp/whl/$WHEEL"
    exit 1
fi
echo "peer wheel: /tmp/whl/$WHEEL ok (md5 $MD5); $(ls /tmp/whl | wc -l) wheels in /tmp/whl"
