"""`python -m experiments.heldout`: the held-out protocol (experiments/heldout/__init__.py)."""

import sys

from experiments.heldout.driver import main

sys.exit(main())
