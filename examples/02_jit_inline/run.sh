#!/usr/bin/env bash
# load_inline: a few-line op compiled from a string, with and without -fopenmp.
# requires: ninja c++
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
export TORCH_EXTENSIONS_DIR="$work/torch_extensions"
python "$here/jit_inline.py"
