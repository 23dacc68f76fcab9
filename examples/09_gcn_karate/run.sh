#!/usr/bin/env bash
# A two-layer GCN built from gc_cpp.GraphConv, trained on Zachary's karate club with two
# labelled members per faction; prints the accuracy on the 30 unlabelled members.
# requires: gc_cpp networkx
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
workdir="${EXAMPLE_WORKDIR:-$(mktemp -d)}"
mkdir -p "$workdir"
python "$here/gcn_karate.py" --layout csr --output "$workdir/karate_predictions.csv"
