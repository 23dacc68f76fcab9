"""python -m shared_build.workspace ci-sessions: the sessions CI runs (see ci.py)."""

import sys

from .ci import main

sys.exit(main())
