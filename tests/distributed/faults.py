"""Run by tests/test_distributed.py under mpiexec: the last rank hangs or dies before a collective."""

from __future__ import annotations

import os
import sys
import time

import verigrad as vg
import verigrad.distributed as dist


def main(kind: str) -> None:
    dist.init_process_group("mpi")
    if dist.get_rank() == dist.get_world_size() - 1:
        if kind == "hang":
            time.sleep(120)
        else:
            os._exit(3)
    dist.all_reduce(vg.ones(4))
    print("no fault seen", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
