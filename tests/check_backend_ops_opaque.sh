#!/bin/sh
# test_backend_ops with the opaque CPU device as the device under test
# (SR_TEST_DEVICE=opaque: the deferred device whose memory the host cannot
# read or write): the harness must reach device memory only through
# sr_dev_copy, as it must on a GPU, and every op still matches the reference.
# (The suite's own test_backend_ops run uses the deferred device.)
sr_threads=keep
. "$(dirname "$0")/lib.sh"
bin="$sr_build/tests/test_backend_ops"
sr_need_built "$bin"
out=$(SR_TEST_DEVICE=opaque SR_TEST_BIG=0 "$bin" 2>&1)
rc=$?
echo "$out" | grep -v ' PASS ' | tail -40
echo "$out" | grep -q '^test_backend_ops: 0 case line(s) failed on opaque' ||
    { echo "FAIL: test_backend_ops on the opaque device (exit status $rc)"; exit 1; }
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
echo "test_backend_ops on the opaque device: ok ($(echo "$out" | grep -c ' PASS ') case lines)"
