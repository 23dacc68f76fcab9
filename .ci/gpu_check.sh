#!/usr/bin/env bash
# The GPU run, on a machine with an NVIDIA GPU and a CUDA toolkit of torch's major version.
#
#   bash .ci/gpu_check.sh                  # build test sanitize bench
#   bash .ci/gpu_check.sh build test       # some of the steps
#
# build:    every package, for the visible GPU (TORCH_CUDA_ARCH_LIST from the GPU), into a
#           venv that sees the system torch (--system-site-packages), offline (--no-deps)
# test:     every test suite with the CUDA tests, except the slow CPU-only ones (distribution
#           round trips need a package index; examples run in `nox -s examples`)
# sanitize: every CUDA test under compute-sanitizer memcheck, racecheck and initcheck,
#           with PyTorch's caching allocator off so out-of-bounds accesses hit real bounds
# bench:    every benchmark (CPU and CUDA), report in $OUT/report
#
# Logs and results go to $OUT (default ./gpu-check). Uses python3 unless PYTHON is set.
# PACKAGES="lltm_cuda add_ext" limits build, tests, sanitizers and benchmarks to those.
# Each step fits one 10-minute call of a lent GPU machine; run them one call each there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/gpu-check}"
PY="${PYTHON:-python3}"
VENV="${GPU_VENV:-/tmp/gpu-check-venv}"
STEPS="${*:-build test sanitize bench}"
mkdir -p "$OUT"

command -v nvidia-smi >/dev/null || { echo "gpu_check: nvidia-smi not found: this needs an NVIDIA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -c 'import torch; assert torch.cuda.is_available(), "torch sees no GPU"; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'
export PYTHONPATH="$ROOT/shared_build/src${PYTHONPATH:+:$PYTHONPATH}"  # for shared_build's own tests
export PYTHONUNBUFFERED=1

PACKAGES="${PACKAGES:-$(cd packages && ls -d */ | tr -d / | tr '\n' ' ')}"
suites() { for p in $PACKAGES; do echo "packages/$p/tests"; done; }

for step in $STEPS; do
  case "$step" in
  build)
    for pkg in $PACKAGES; do
      echo "== build $pkg"
      "$VPY" -m pip install -q --no-build-isolation --no-deps --force-reinstall "packages/$pkg" 2>&1 | tee -a "$OUT/build.log"
    done
    ;;
  test)
    echo "== test"
    "$VPY" -m pytest shared_build/tests $(suites) tests -m "not slow or cuda" -ra \
      --junitxml="$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log"
    ;;
  sanitize)
    sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    # Every CUDA test that is not marked slow (torch.compile, builds): they launch every
    # kernel with odd sizes, every dtype, strided and empty inputs, and the property tests
    # (tests/test_properties.py, CUDA cases; they need hypothesis in the system Python)
    # with drawn ones. Without the caching allocator each tensor is its own cudaMalloc, so
    # a read past the end of one is reported instead of landing in a neighbour.
    targets=""
    for pkg in $PACKAGES; do targets="$targets $pkg=packages/$pkg/tests"; done
    targets="$targets properties=tests/test_properties.py"
    for target in $targets; do
      name="${target%%=*}"
      for tool in memcheck racecheck initcheck; do
        echo "== $name: compute-sanitizer --tool $tool"
        log="$OUT/sanitizer-$name-$tool.log"
        rc=0
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool "$tool" --error-exitcode 99 \
          --target-processes all --log-file "$log" \
          "$VPY" -m pytest "${target#*=}" -m "cuda and not slow" -q -x -p no:cacheprovider 2>&1 | tail -3 || rc=$?
        # One line per tool: the errors of every process it watched, summed.
        errors="$(grep -hoE "ERROR SUMMARY: [0-9]+" "$log" | awk '{n += $3} END {print n + 0}')"
        echo "gpu_check: $name $tool: $errors errors"
        # 5: pytest collected no CUDA test there; anything else non-zero is a failure.
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
        if [ "$errors" -ne 0 ]; then exit 99; fi
      done
    done
    ;;
  bench)
    echo "== bench"
    only=""; for p in $PACKAGES; do only="$only --only $p"; done
    "$VPY" benchmarks/run.py --output "$OUT/bench-gpu.json" --no-build-times $only 2>&1 | tee "$OUT/bench.log"
    "$VPY" benchmarks/report.py --output-dir "$OUT/report" "$OUT/bench-gpu.json" --no-plots | tail -60
    ;;
  *)
    echo "gpu_check: unknown step '$step' (build, test, sanitize, bench)" >&2
    exit 2
    ;;
  esac
done
echo "gpu_check: done; logs in $OUT"
