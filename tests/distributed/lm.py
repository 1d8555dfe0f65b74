"""Run by tests/test_distributed.py under mpiexec: `verigrad train lm ARGS` with the token cache in the
folder given first (as tests/test_lm_train.py's `data_cache`)."""

from __future__ import annotations

import sys
from pathlib import Path

from verigrad.cli import main
from verigrad.data import text

if __name__ == "__main__":
    cache = Path(sys.argv[1])
    text.cache_dir = lambda: cache
    sys.exit(main(sys.argv[2:]))
