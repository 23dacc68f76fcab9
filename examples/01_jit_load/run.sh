#!/usr/bin/env bash
# JIT build with torch.utils.cpp_extension.load(): compile once, then load from the cache.
# requires: ninja c++
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${EXAMPLE_WORKDIR:-$(mktemp -d)}"

# The build cache: load() compiles into $TORCH_EXTENSIONS_DIR/<name>.
export TORCH_EXTENSIONS_DIR="$work/torch_extensions"

echo "== first run: compiles add.cpp into $TORCH_EXTENSIONS_DIR"
python "$here/jit_load.py"
echo
echo "== second run, a new process: loads the module from the cache"
python "$here/jit_load.py" --expect-cache-hit
