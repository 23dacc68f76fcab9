#!/usr/bin/env bash
# Everything lltm_cuda owes on a GPU, in one command, from any folder:
#
#   bash packages/lltm_cuda/gpu_check.sh [output folder]
#
# in an environment with a CUDA build of torch, a CUDA toolkit (nvcc and
# compute-sanitizer) and pytest. It
#   1. builds lltm_cpu and lltm_cuda (for the visible GPU's architecture),
#   2. runs both test suites: the shared LLTM suite on CPU and on CUDA, CPU-vs-CUDA
#      agreement, streams, CUDA graph capture, torch.compile (Inductor),
#   3. runs compute-sanitizer memcheck and racecheck over the tests that launch the
#      kernels (every dtype, odd and large sizes, non-contiguous inputs, empty batch),
#   4. runs the benchmark (lltm_cuda and lltm_cpu) into <output folder>/bench.json.
# Stops at the first failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/build/gpu_check_lltm}"  # build/ is git-ignored
python="${PYTHON:-python}"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
sanitizer="$(command -v compute-sanitizer || echo "$cuda_home/bin/compute-sanitizer")"
mkdir -p "$out"
cd "$root"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
"$python" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"

echo "== 1. build"
"$python" -m pip install --no-build-isolation --no-deps --force-reinstall \
  ./packages/lltm_cpu ./packages/lltm_cuda

echo "== 2. tests"
"$python" -m pytest packages/lltm_cuda/tests packages/lltm_cpu/tests -q -rs

echo "== 3. compute-sanitizer"
# The tests whose work is the kernels (no Inductor compile, no graph capture: both are
# slow under the sanitizer and launch nothing of ours that the others do not).
kernels="forward_matches or gradients_of_all or backward_op or saturated or nan_propagates"
kernels="$kernels or non_contiguous or expanded_gradient or empty_batch or batch_one"
kernels="$kernels or only_one_output or grid_stride or agrees_with or exact_double"
# Without the caching allocator every tensor is its own cudaMalloc, so an access past
# the end of one is an error instead of a read of a neighbour.
PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool memcheck --leak-check no \
  --error-exitcode 1 "$python" -m pytest packages/lltm_cuda/tests/test_lltm_cuda.py -q -x \
  -k "$kernels"
"$sanitizer" --tool racecheck --error-exitcode 1 \
  "$python" -m pytest packages/lltm_cuda/tests/test_lltm_cuda.py -q -x \
  -k "($kernels) and not B40 and not 4096"

echo "== 4. benchmark"
"$python" benchmarks/run.py --only lltm_cuda --only lltm_cpu --no-build-times \
  --output "$out/bench.json"
echo "gpu_check: all passed; benchmark figures in $out/bench.json"
