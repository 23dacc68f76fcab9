#!/usr/bin/env bash
# The GPU check (docs/gpu-check.md; --help), run by $PYTHON or the python3 whose torch it uses.
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@"
