#!/usr/bin/env bash
# The GPU check (.ci/gpu_check.py says what it does), run by the python3 whose torch it uses:
#   bash .ci/gpu_check.sh                      # every step within 480 s, logs under $OUT
#   bash .ci/gpu_check.sh --dry-run            # the plan, each test file's expected time
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@"
