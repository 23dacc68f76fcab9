#!/usr/bin/env bash
# Train an LLTM (lltm_cpu, or lltm_cuda on a GPU) on generated sine waves; fails if the
# loss does not fall.
# requires: lltm_cpu
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workdir="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
mkdir -p "$workdir"
cd "$workdir"
python "$here/train.py" "$@"
