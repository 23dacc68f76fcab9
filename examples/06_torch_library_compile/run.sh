#!/usr/bin/env bash
# torch.library: a C++ schema and kernel, Python fake and autograd, torch.compile(fullgraph=True).
# requires: ninja c++
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
export TORCH_EXTENSIONS_DIR="$work/torch_extensions"
python "$here/swish.py"
