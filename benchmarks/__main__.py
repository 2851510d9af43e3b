"""``python -m benchmarks``: run every benchmark and write docs/benchmarks.md (see run_all.py)."""

import sys

from benchmarks.run_all import main

sys.exit(main())
