#!/usr/bin/env bash
# Example 07's LLTM training under DDP (gloo, 2 processes on this machine); checks that the
# ranks end with identical parameters, equal to single-process training on the same data.
# requires: lltm_cpu
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workdir="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
mkdir -p "$workdir"
python "$here/train_ddp.py" --workdir "$workdir/ddp" "$@"
