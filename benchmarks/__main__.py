"""``python -m benchmarks``: run every benchmark and write docs/benchmarks.md (see run_all.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts import each other by bare name

from run_all import main

sys.exit(main())
