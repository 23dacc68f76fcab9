#!/usr/bin/env bash
#   bash .ci/without_system_cuda.sh COMMAND...
# runs COMMAND with no system CUDA compiler reachable (docs/ci.md): in a private mount
# namespace the /usr/local/cuda* toolkits are emptied and every nvcc on PATH is masked;
# CUDA_HOME and CUDA_PATH are unset. Needs root (or user namespaces) and unshare where there
# is a toolkit to hide; where there is none (a CI container, which may not allow a mount
# namespace) it only unsets the variables.
set -euo pipefail
if ! compgen -G "/usr/local/cuda*" >/dev/null && ! command -v nvcc >/dev/null; then
  unset CUDA_HOME CUDA_PATH _WITHOUT_SYSTEM_CUDA
  echo "without_system_cuda: there is no system CUDA compiler; running: $*" >&2
  exec "$@"
fi
if [ "${_WITHOUT_SYSTEM_CUDA:-}" != 1 ]; then
  command -v unshare >/dev/null || { echo "without_system_cuda: unshare (util-linux) is needed" >&2; exit 2; }
  exec unshare --mount --propagation private env _WITHOUT_SYSTEM_CUDA=1 bash "$0" "$@"
fi
for dir in /usr/local/cuda*; do
  if [ -d "$dir" ] && [ ! -L "$dir" ]; then mount -t tmpfs none "$dir"; fi
done
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
  if [ -e "$dir/nvcc" ]; then mount --bind /dev/null "$dir/nvcc"; fi
done
unset CUDA_HOME CUDA_PATH _WITHOUT_SYSTEM_CUDA
if nvcc --version >/dev/null 2>&1 || [ -e /usr/local/cuda/bin/nvcc ]; then
  echo "without_system_cuda: a system nvcc is still reachable" >&2
  exit 1
fi
echo "without_system_cuda: no system CUDA compiler is reachable; running: $*" >&2
exec "$@"
