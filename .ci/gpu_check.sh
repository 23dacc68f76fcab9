#!/usr/bin/env bash
# The GPU run, on a machine with an NVIDIA GPU, offline, with only this repository.
#
#   bash .ci/gpu_check.sh                        # preflight build test sanitize bench
#   bash .ci/gpu_check.sh build test             # some of the steps (preflight always runs)
#   GPU_CHECK_DRY_RUN=1 bash .ci/gpu_check.sh    # print the plan, run nothing
#
# It uses the machine's python3 and its torch (2.11 or newer; under 2.11 and 2.12 the two
# stable-ABI packages are built for that torch, SHARED_BUILD_STABLE_TARGET) and downloads
# nothing: the packages are built with --no-build-isolation --no-deps in a venv that sees
# the system site-packages.
#
# preflight: names anything missing (GPU, torch with CUDA, nvcc of torch's CUDA major,
#            setuptools>=77, ninja, pytest, hypothesis, cv2, compute-sanitizer) and stops.
# build:     every package for the visible GPU's architecture; the CUDA packages with
#            USE_CUDA=1 (a CPU-only build of one, or a library carrying its own static
#            libstdc++, is a failure), in parallel.
# test:      every suite, CPU and CUDA tests, except slow CPU-only ones (builds, examples),
#            each suite in its own pytest; the first crash is rerun under cuda-gdb for a native
#            backtrace. A failure, no test run, or a skip for want of a GPU or a module
#            fails it.
# bench:     the benchmarks on the GPU (--device cuda), report in $OUT/report.
# sanitize:  compute-sanitizer memcheck, racecheck and initcheck over the CUDA tests of each
#            package with CUDA sources (our kernels) and the CUDA property tests, without
#            the caching allocator (each tensor
#            its own cudaMalloc, so a read past its end is caught). CUDA-graph capture cannot
#            run without the caching allocator, so the graph-capture tests are deselected
#            here, and only here. The runs go GPU_CHECK_JOBS (6) at a time.
#
# Every step prints one line `gpu_check: STEP: ...`; all of them are collected in
# $OUT/summary.txt, logs beside it. The script goes on after a failed step (but runs nothing
# after a failed build: those libraries prove nothing) and exits 1 at
# the end if any failed (2 when preflight fails). GPU_CHECK_DEADLINE (epoch seconds) caps
# every step's time so the whole run ends before it, each step within its share of the
# time left (step_share); a step cut short fails and says so.
# PACKAGES="lltm_cuda add_ext" limits build, tests, sanitizers and benchmarks to those.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/gpu-check}"
PY="${PYTHON:-python3}"
VENV="${GPU_VENV:-/tmp/gpu-check-venv}"
JOBS="${GPU_CHECK_JOBS:-6}"
DRY="${GPU_CHECK_DRY_RUN:-0}"
STEPS="${*:-build test sanitize bench}"
PACKAGES="${PACKAGES:-$(cd packages && ls -d */ | tr -d / | tr '\n' ' ')}"
# The graph-capture tests (one per CUDA package), which need the caching allocator.
GRAPH_CAPTURE_TESTS="graph_capture"
mkdir -p "$OUT"
: >"$OUT/summary.txt"
failed=0

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
# A package with CUDA sources (a .cu file): built with USE_CUDA=1.
is_cuda_package() { [ -n "$(find "packages/$1/csrc" -name '*.cu' -print -quit 2>/dev/null)" ]; }
# Seconds a step may take: its own cap, or less when its share of the time left before
# GPU_CHECK_DEADLINE is near (STEP_DEADLINE, set as each step starts).
budget() {
  local cap=$1
  if [ -n "${STEP_DEADLINE:-}" ]; then
    local left=$((STEP_DEADLINE - $(date +%s)))
    [ "$left" -lt "$cap" ] && cap=$left
  fi
  [ "$cap" -lt 1 ] && cap=1
  echo "$cap"
}
# The share (percent) of the time left that a step may take under GPU_CHECK_DEADLINE, so
# that a slow step cannot starve the ones after it: what a step leaves goes to the next.
step_share() {
  case "$1" in
    build) echo 100 ;;    # nothing runs without it
    test) echo 45 ;;
    sanitize) echo 65 ;;  # of what test left
    *) echo 100 ;;        # the last step: bench
  esac
}

for step in $STEPS; do
  case "$step" in build | test | bench | sanitize) ;; *)
    echo "gpu_check: unknown step '$step' (build, test, bench, sanitize)" >&2
    exit 2
    ;;
  esac
done
if [ "$DRY" = 1 ]; then
  echo "gpu_check plan: steps: preflight $STEPS; packages: $PACKAGES"
  for pkg in $PACKAGES; do
    if is_cuda_package "$pkg"; then echo "  build $pkg with USE_CUDA=1 (CUDA sources)"; else echo "  build $pkg (no CUDA sources)"; fi
  done
  echo "  sanitize deselects: -k 'not $GRAPH_CAPTURE_TESTS'; $JOBS runs at a time"
fi

# ---------------------------------------------------------------- preflight
# The C++ compiler for the builds: the first of $CXX (kept whole: "ccache g++"), c++, g++
# that links the shared libstdc++ by default, as shared-build doctor judges it. One that
# links a static copy (the H100 image's build compiler, "g++-real", did) gives each library
# a second C++ runtime beside torch's, which crashed at the first stream that crossed over
# (shared_build also names the shared one on the link line, and fails a build whose
# library still carries a copy).
pick_cxx() {
  PYTHONPATH="$PWD/shared_build/src" "${PY:-python3}" - <<'EOF'
import os
import sys

from shared_build import doctor

for candidate in (os.environ.get("CXX", "").strip(), "c++", "g++"):
    finding = candidate and doctor.check_cxx_runtime({**os.environ, "CXX": candidate})
    if finding and finding.status == "ok":
        print(candidate)
        sys.exit(0)
    if finding:
        print(f"  {finding.text}: not used", file=sys.stderr)
sys.exit(1)
EOF
}

preflight() {
  local missing=()
  local cxx
  if cxx="$(pick_cxx)"; then
    export CXX="$cxx"
    echo "  CXX=$CXX ($($CXX --version | head -1)); CC=${CC:-unset}; LDSHARED=${LDSHARED:-unset}"
  else
    echo "  no compiler among CXX=${CXX:-unset}, c++, g++ links the shared libstdc++ by default: the build names it on the link line"
  fi
  command -v nvidia-smi >/dev/null || missing+=("nvidia-smi (this needs an NVIDIA GPU and its driver)")
  command -v readelf >/dev/null || missing+=("readelf (binutils: the build step checks how each library links libstdc++)")
  if ! command -v "$PY" >/dev/null; then
    say "gpu_check: preflight: FAILED: no $PY"
    return 1
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    # A venv that sees $PY's packages (its torch above all). --system-site-packages alone
    # is not enough where $PY is itself a venv (the GPU machine's python3 is
    # /opt/torch/.venv/bin/python3): that flag reaches the base interpreter's packages, not
    # the venv's. A .pth file with $PY's site-packages adds those after the new venv's own.
    # --without-pip: pip, setuptools and the rest come from $PY (3.11 bundles an old setuptools).
    "$PY" -m venv --system-site-packages --without-pip "$VENV" || { say "gpu_check: preflight: FAILED: could not make a venv at $VENV"; return 1; }
    "$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
      >"$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_gpu_check_parent.pth"
  fi
  local report
  report="$("$VENV/bin/python" - "$STEPS" <<'EOF'
import importlib, shutil, subprocess, sys
steps = sys.argv[1].split()
missing, facts = [], []
def have(module, why):
    try:
        return importlib.import_module(module)
    except Exception as error:
        missing.append(f"{module} ({why}; {type(error).__name__}: {error})")
torch = have("torch", "the packages build against it")
if torch is not None:
    from packaging.version import Version
    version = Version(Version(torch.__version__).base_version)
    facts.append(f"torch {torch.__version__} CUDA {torch.version.cuda}")
    if version < Version("2.11"):
        missing.append(f"torch >= 2.11 (the oldest our stable-ABI packages build for; found {torch.__version__})")
    elif version < Version("2.13"):
        facts.append(f"STABLE_TARGET={version.major}.{version.minor}")
    if torch.version.cuda is None:
        missing.append(f"a CUDA build of torch (found {torch.__version__}, CPU-only)")
    elif not torch.cuda.is_available():
        missing.append("a GPU that torch can use (torch.cuda.is_available() is False)")
    else:
        major, minor = torch.cuda.get_device_capability(0)
        facts.append(f"GPU {torch.cuda.get_device_name(0)} sm_{major}{minor}")
        facts.append(f"ARCH={major}.{minor}")
    if torch.version.cuda is not None:
        from torch.utils import cpp_extension
        home = cpp_extension.CUDA_HOME
        nvcc = shutil.which("nvcc") or (home and f"{home}/bin/nvcc")
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
            release = out.split("release ")[1].split(",")[0]
            facts.append(f"nvcc {release} at {nvcc}")
            if release.split(".")[0] != torch.version.cuda.split(".")[0]:
                missing.append(f"an nvcc of CUDA {torch.version.cuda.split('.')[0]} (torch's; found {release} at {nvcc})")
        except Exception:
            missing.append(f"nvcc (CUDA {torch.version.cuda}'s compiler, for the CUDA kernels; looked on PATH and in CUDA_HOME={home})")
setuptools = have("setuptools", "builds the packages")
if setuptools is not None:
    from packaging.version import Version
    if Version(setuptools.__version__) < Version("77"):
        missing.append(f"setuptools >= 77 (our pyproject.toml license fields; found {setuptools.__version__})")
have("ninja", "torch.utils.cpp_extension builds with it")
if "test" in steps or "sanitize" in steps:
    have("pytest", "runs the tests")
    have("hypothesis", "the property tests, CUDA cases included")
    have("cv2", "warp_perspective's tests compare with OpenCV")
    have("numpy", "the tests")
    if importlib.util.find_spec("xdist") is None:
        facts.append("no pytest-xdist: tests run in one process")
if "sanitize" in steps:
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if shutil.which(sanitizer) is None:
        missing.append("compute-sanitizer (the sanitize step; on PATH or /usr/local/cuda/bin)")
    else:
        facts.append(f"SANITIZER={sanitizer}")
for fact in facts:
    print("FACT", fact)
for item in missing:
    print("MISSING", item)
EOF
)" || true
  echo "$report" | sed -n 's/^FACT /  /p'
  while IFS= read -r line; do
    case "$line" in MISSING*) missing+=("${line#MISSING }") ;; esac
  done <<<"$report"
  if [ "${#missing[@]}" -ne 0 ]; then
    say "gpu_check: preflight: FAILED: missing ${#missing[@]}:"
    for item in "${missing[@]}"; do say "  - $item"; done
    return 1
  fi
  ARCH="$(echo "$report" | sed -n 's/^FACT ARCH=//p')"
  SANITIZER="$(echo "$report" | sed -n 's/^FACT SANITIZER=//p')"
  local target
  target="$(echo "$report" | sed -n 's/^FACT STABLE_TARGET=//p')"
  if [ -n "$target" ]; then export SHARED_BUILD_STABLE_TARGET="$target"; fi
  say "gpu_check: preflight: ok ($(echo "$report" | sed -n 's/^FACT \(torch\|GPU\|nvcc\)/\1/p' | tr '\n' ';' | sed 's/;$//'))"
}

VPY="$VENV/bin/python"
export PYTHONPATH="$ROOT/shared_build/src${PYTHONPATH:+:$PYTHONPATH}"  # for shared_build's own tests
export PYTHONUNBUFFERED=1
if [ "$DRY" != 1 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
  preflight || exit 2
  [ -n "${SHARED_BUILD_STABLE_TARGET:-}" ] && echo "  stable-ABI packages built for torch >= $SHARED_BUILD_STABLE_TARGET"
fi
suites() { for p in $PACKAGES; do echo "packages/$p/tests"; done; }
xdist_args() { if "$VPY" -c "import xdist" 2>/dev/null; then echo "-n ${1} --dist loadfile --max-worker-restart 1"; fi; }

# ---------------------------------------------------------------- steps
step_build() {
  local pids=() pkg
  export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$ARCH}"
  for pkg in $PACKAGES; do
    local cuda=auto
    is_cuda_package "$pkg" && cuda=1
    (
      start=$(date +%s)
      USE_CUDA=$cuda MAX_JOBS=$(($(nproc) / 2 + 1)) timeout -k 10 "$(budget 480)" \
        "$VPY" -m pip install --no-build-isolation --no-deps --force-reinstall --no-cache-dir \
        "packages/$pkg" >"$OUT/build-$pkg.log" 2>&1
      echo "$? $(($(date +%s) - start))" >"$OUT/build-$pkg.rc"
    ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  local bad=() times=()
  for pkg in $PACKAGES; do
    read -r rc secs <"$OUT/build-$pkg.rc"
    times+=("$pkg ${secs}s")
    if [ "$rc" -ne 0 ]; then
      bad+=("$pkg (exit $rc, $OUT/build-$pkg.log)")
      tail -20 "$OUT/build-$pkg.log"
      continue
    fi
    # A CUDA package built without its kernels would fail its CUDA tests with a dispatcher
    # error that does not say why: check its build record instead.
    if is_cuda_package "$pkg" && ! "$VPY" -c "import $pkg, sys; info = $pkg.BUILD_INFO; sys.exit(0 if info.get('cuda') else 1)" 2>>"$OUT/build-$pkg.log"; then
      bad+=("$pkg (built without CUDA kernels)")
    fi
  done
  if [ "${#bad[@]}" -ne 0 ]; then
    say "gpu_check: build: FAILED: ${bad[*]}"
    return 1
  fi
  # What built them, for reading a crash: compiler, nvcc and the libstdc++ each library uses.
  for pkg in $PACKAGES; do
    "$VPY" -c "import $pkg as p; i = p.BUILD_INFO; print(f'  {p.__name__}: {i.get(\"compiler\")}; nvcc {i.get(\"cuda\")}; arch {i.get(\"arch_list\")}; target {i.get(\"torch_target\")}')" 2>&1 | tail -1
  done
  # Each library must load the process's shared libstdc++: one linked with a static copy
  # (a compiler wrapper adding -static-libstdc++) crashes where a stream crosses into torch.
  local lib static=()
  # readelf -d: the library's own needs (ldd would also list what its dependencies need).
  while IFS= read -r lib; do
    readelf -d "$lib" 2>/dev/null | grep -q "NEEDED.*libstdc++.so" || static+=("${lib##*/site-packages/}")
  done < <(find "$VENV" -name '*.so' -path '*packages*' -newer "$OUT/summary.txt")
  if [ "${#static[@]}" -ne 0 ]; then
    say "gpu_check: build: FAILED: linked without the shared libstdc++ (a second C++ runtime beside torch's): ${static[*]}"
    return 1
  fi
  say "gpu_check: build: ok for sm_${ARCH/./} ($(IFS=,; echo "${times[*]}"))"
}

# A native backtrace of a suite's first crash (a segfault in an op kills pytest, or every
# xdist worker at collection, with Python frames only): rerun it in one process under
# cuda-gdb, stopping at the first failure.
backtrace() {  # NAME SUITE
  local gdb
  gdb="$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)"
  [ -x "$gdb" ] || { echo "  (no cuda-gdb here: no native backtrace)"; return 0; }
  timeout -k 10 "$(budget 120)" "$gdb" -q -batch -ex run -ex "bt 40" --args "$VPY" -m pytest "$2" \
    -m "not slow or cuda" -x -q -p no:cacheprovider -p no:xdist >"$OUT/crash-$1-gdb.txt" 2>&1
  echo "  native backtrace of $1's first crash ($OUT/crash-$1-gdb.txt):"
  grep -E "^#|received signal" "$OUT/crash-$1-gdb.txt" | head -25 | cut -c1-220 | sed 's/^/    /'
}

step_test() {
  # One pytest per suite: a crash in one (a segfault at import kills every xdist worker
  # during collection) cannot hide the others' results.
  local suite name rc line bad=0 passed=0 failed=0 skipped=0 traced=0
  for suite in shared_build/tests $(suites) tests; do
    name="$(basename "$(dirname "$suite")")"
    [ "$suite" = tests ] && name=repo
    [ "$suite" = shared_build/tests ] && name=shared_build
    rc=0
    # shellcheck disable=SC2046
    timeout -k 10 "$(budget 300)" "$VPY" -X faulthandler -m pytest "$suite" -m "not slow or cuda" \
      -p no:cacheprovider -q $(xdist_args 8) --junitxml="$OUT/tests-$name.xml" \
      >"$OUT/tests-$name.log" 2>&1 || rc=$?
    grep -E "^(FAILED|ERROR)" "$OUT/tests-$name.log" | head -15 | cut -c1-220
    line="$("$VPY" .ci/gpu_junit.py "test $name" "$OUT/tests-$name.xml" --rc "$rc")" || bad=1
    [ "$rc" -eq 124 ] && { line="$line (cut short at its time limit)"; bad=1; }
    say "$line"
    if grep -qE "Fatal Python error|node down" "$OUT/tests-$name.log"; then
      say "gpu_check: test $name: a test process crashed ($OUT/tests-$name.log)"
      bad=1
      # One native backtrace per run: under cuda-gdb each costs up to two minutes, and the
      # crashes of one run have so far shared their cause.
      [ "$traced" = 0 ] && backtrace "$name" "$suite"
      traced=1
    fi
  done
  [ "$bad" -eq 0 ] && say "gpu_check: test: ok" || say "gpu_check: test: FAILED"
  return $bad
}

step_bench() {
  local only="" p rc=0
  for p in $PACKAGES; do only="$only --only $p"; done
  # shellcheck disable=SC2086
  timeout -k 10 "$(budget 300)" "$VPY" benchmarks/run.py --device cuda --output "$OUT/bench-gpu.json" \
    --no-build-times $only >"$OUT/bench.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || [ ! -s "$OUT/bench-gpu.json" ]; then
    tail -20 "$OUT/bench.log"
    say "gpu_check: bench: FAILED (exit $rc; $OUT/bench.log)"
    return 1
  fi
  "$VPY" benchmarks/report.py --output-dir "$OUT/report" "$OUT/bench-gpu.json" --no-plots >"$OUT/bench-report.log" 2>&1
  local rows failures
  rows="$("$VPY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(sum(m['device']=='cuda' for m in r['measurements']))" "$OUT/bench-gpu.json")"
  failures="$("$VPY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(', '.join(f'{k}: {v}' for k, v in r['failures'].items()))" "$OUT/bench-gpu.json")"
  if [ -n "$failures" ] || [ "$rows" -eq 0 ]; then
    say "gpu_check: bench: FAILED ($rows CUDA measurements; failures: ${failures:-none})"
    return 1
  fi
  say "gpu_check: bench: ok, $rows CUDA measurements ($OUT/report)"
}

sanitize_one() {  # NAME TOOL TESTPATH SECONDS
  local name=$1 tool=$2 path=$3 secs=$4 rc=0
  local log="$OUT/sanitizer-$name-$tool.log"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 "$secs" "$SANITIZER" --tool "$tool" --error-exitcode 99 \
    --target-processes all --log-file "$log" \
    "$VPY" -m pytest "$path" -m "cuda and not slow" -k "not $GRAPH_CAPTURE_TESTS" -q -p no:cacheprovider \
    --junitxml="$OUT/sanitizer-$name-$tool.xml" >"$OUT/sanitizer-$name-$tool.out" 2>&1 || rc=$?
  local errors
  errors="$(grep -hoE "ERROR SUMMARY: [0-9]+" "$log" 2>/dev/null | awk '{n += $3} END {print n + 0}')"
  local line
  line="$("$VPY" .ci/gpu_junit.py "sanitize $name $tool" "$OUT/sanitizer-$name-$tool.xml" --rc "$([ "$rc" -eq 99 ] && echo 0 || echo "$rc")")"
  local ok=$?
  [ "$rc" -eq 124 ] && { line="$line (cut short at ${secs}s)"; ok=1; }
  if [ "$errors" -ne 0 ] || [ "$rc" -eq 99 ]; then line="$line; $errors sanitizer errors ($log)"; ok=1; else line="$line; 0 sanitizer errors"; fi
  echo "$line" >"$OUT/sanitizer-$name-$tool.line"
  return $ok
}

step_sanitize() {
  # Our kernels: the packages with CUDA sources, and the CUDA property tests. gc_cpp and
  # lltm_cpu launch only torch's own kernels on CUDA (and gc_cpp's took over 166 s per tool).
  local targets="" pkg
  for pkg in $PACKAGES; do is_cuda_package "$pkg" && targets="$targets $pkg=packages/$pkg/tests"; done
  targets="$targets properties=tests/test_properties.py"
  local jobs=() target tool
  for target in $targets; do
    if ! "$VPY" -m pytest "${target#*=}" -m "cuda and not slow" -k "not $GRAPH_CAPTURE_TESTS" \
      --collect-only -q -p no:cacheprovider >/dev/null 2>&1; then
      say "gpu_check: sanitize ${target%%=*}: FAILED (its CUDA tests could not be collected)"
      continue
    fi
    for tool in memcheck racecheck initcheck; do jobs+=("${target%%=*} $tool ${target#*=}"); done
  done
  # Each run's limit: the step's time split over the waves of $JOBS runs at a time.
  local secs waves=$(((${#jobs[@]} + JOBS - 1) / JOBS))
  [ "$waves" -lt 1 ] && waves=1
  secs=$(($(budget $((420 * waves))) / waves))
  export -f sanitize_one
  export OUT VPY SANITIZER GRAPH_CAPTURE_TESTS
  printf '%s\n' "${jobs[@]}" | xargs -P "$JOBS" -L 1 bash -c 'sanitize_one "$0" "$1" "$2" '"$secs"
  # Then, with what time is left, information and no verdict: whether initcheck sees what
  # cuBLAS writes (.ci/gpu_initcheck_cublas.py says why).
  local probe_rc=0 probe_log="$OUT/sanitizer-cublas-probe.log"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 "$(budget 120)" "$SANITIZER" --tool initcheck \
    --log-file "$probe_log" "$VPY" .ci/gpu_initcheck_cublas.py \
    >"$OUT/sanitizer-cublas-probe.out" 2>&1 || probe_rc=$?
  say "gpu_check: sanitize cublas probe (information, exit $probe_rc, $probe_log): $(grep -hoE "ERROR SUMMARY: [0-9]+" "$probe_log" 2>/dev/null || echo "no summary"); kernels flagged: $(grep -h "Device Frame" "$probe_log" 2>/dev/null | sed 's/.*Device Frame: *//' | cut -c1-60 | sort -u | tr '\n' ';')"
  local bad=0 job
  grep -q "sanitize .*could not be collected" "$OUT/summary.txt" && bad=1
  for job in "${jobs[@]}"; do
    set -- $job
    local line
    line="$(cat "$OUT/sanitizer-$1-$2.line" 2>/dev/null || echo "gpu_check: sanitize $1 $2: FAILED (no result)")"
    echo "$line" | tee -a "$OUT/summary.txt"
    case "$line" in *FAILED* | *"sanitizer errors ("*) bad=1 ;; esac
  done
  if [ "$bad" -ne 0 ]; then say "gpu_check: sanitize: FAILED"; return 1; fi
  say "gpu_check: sanitize: ok, ${#jobs[@]} runs, 0 errors"
}

build_failed=0
for step in $STEPS; do
  if [ "$DRY" = 1 ]; then echo "  step $step"; continue; fi
  if [ "$build_failed" = 1 ]; then
    # Libraries that did not build, or built wrong, prove nothing and would spend the
    # lease's minutes crashing.
    say "gpu_check: $step: FAILED (not run: the build step failed)"
    continue
  fi
  echo "== $step"
  if [ -n "${GPU_CHECK_DEADLINE:-}" ]; then
    STEP_DEADLINE=$(($(date +%s) + (GPU_CHECK_DEADLINE - $(date +%s)) * $(step_share "$step") / 100))
  fi
  if ! "step_$step"; then
    failed=1
    [ "$step" = build ] && build_failed=1
  fi
done
[ "$DRY" = 1 ] && exit 0
echo "== summary"
cat "$OUT/summary.txt"
echo "gpu_check: done; logs in $OUT"
exit "$failed"
