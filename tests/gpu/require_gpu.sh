#!/bin/sh
# Exits 0 when an NVIDIA GPU is visible to this process; otherwise prints why
# (prefixed with $1, the caller's name) and exits 1. The GPU suite (make
# test-gpu, tests/gpu/check_*.sh) runs this first: on a machine without a GPU
# it must stop with a clear message, never pass or skip quietly.
who=${1:-tests/gpu}
case "${CUDA_VISIBLE_DEVICES-unset}" in
"" | "-1" | none | NoDevFiles)
    echo "$who: FAIL: no GPU visible: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU"
    exit 1
    ;;
esac
if command -v nvidia-smi >/dev/null 2>&1; then
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        exit 0
    fi
    echo "$who: FAIL: no GPU visible: nvidia-smi -L lists none ($(nvidia-smi -L 2>&1 | head -1))"
    exit 1
fi
if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    exit 0
fi
echo "$who: FAIL: no GPU visible (no nvidia-smi, no /dev/nvidia0); HINT: run the GPU suite on a" \
    "machine with an NVIDIA GPU and its driver"
exit 1
