"""``python -m shared_build``: see cli.py."""

import sys

from .cli import main

sys.exit(main())
