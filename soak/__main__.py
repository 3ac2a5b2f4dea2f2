"""``python -m soak``: see soak/run.py."""

import sys

from soak.run import main

sys.exit(main())
