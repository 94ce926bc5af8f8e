#!/bin/sh
# The PyTorch check (tests/check_torch_equivalence.sh: shardrec and
# tools/torch_dlrm.py train the same DLRM from the same weights on the same
# file, per-step losses within 1e-4 relative, final weights as that script
# says, with its negative controls) with shardrec training on the GPU:
# `shardrec train --device cuda --math fp32`. PyTorch runs on the CPU in
# float32 and float64, as in the CPU suite: it is the reference, not the
# device under test.
#
# Stops with a message and exit status 1 when no GPU is visible; exit status
# 77 (from the CPU script) when PyTorch is missing, which make test-gpu also
# treats as a failure.
sr_threads=keep
. "$(dirname "$0")/../lib.sh"
sh "$sr_tests/gpu/require_gpu.sh" check_gpu_torch || exit 1
SHARDREC_TRAIN_FLAGS="--device cuda --math fp32 ${SHARDREC_TRAIN_FLAGS:-}" BUILD="$BUILD" \
    sh "$sr_tests/check_torch_equivalence.sh"
rc=$?
[ $rc -eq 77 ] && echo "check_gpu_torch: FAIL: the PyTorch check could not run (see above)"
exit $rc
