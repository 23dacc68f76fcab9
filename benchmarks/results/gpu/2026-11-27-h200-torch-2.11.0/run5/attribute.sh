#!/usr/bin/env bash
# One-off: which lltm_cuda test makes initcheck report (run 2 of 2026-11-27 night).
set -u
export PYTHONUNBUFFERED=1
OUT=/tmp/gc timeout 100 python3 .ci/gpu_check.py --steps build --packages lltm_cpu,lltm_cuda --budget 95 | tail -3
PY=/tmp/gpu-check-venv/bin/python
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export PYTHONPATH=$PWD/.ci:$PWD/shared_build/src PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
  SHARED_BUILD_BATTERY_SKIP_DTYPES=float16,bfloat16 TORCHINDUCTOR_COMPILE_THREADS=1
K="not graph_capture and not 2_to_the_31 and not gradcheck and not opcheck and not threads and not compile and not export and not aoti and not torchscript and not float16 and not bfloat16"
$PY -m pytest packages/lltm_cuda/tests/test_lltm_cuda.py -m "cuda and not slow" -k "$K" --collect-only -q -p no:cacheprovider 2>/dev/null | grep '::' > /tmp/ids.txt
wc -l < /tmp/ids.txt
mkdir -p /tmp/attr
one() {
  n=$(echo "$1" | md5sum | cut -c1-8)
  timeout 115 $SAN --tool initcheck --check-bulk-copy yes --show-backtrace device --log-file /tmp/attr/$n.log \
    $PY -m pytest "$1" -q -p no:cacheprovider -x > /tmp/attr/$n.out 2>&1
  rc=$?
  e=$(grep -m1 "ERROR SUMMARY" /tmp/attr/$n.log)
  k=$(grep -m1 -E "^=+ +at " /tmp/attr/$n.log | cut -c1-150)
  echo "rc=$rc $1 | $e | $k"
}
export -f one; export SAN PY
xargs -a /tmp/ids.txt -P 16 -I{} bash -c 'one "$@"' _ {}
tar czf $OUT/attr.tar.gz -C /tmp attr
