"""Data-parallel training over MPI: step and communication time at 1 and 2 ranks on this machine, and
the ring all-reduce model of N machines from the measured latency and bandwidth.

    python benchmarks/distributed.py [--repeats 7] [--steps 10] [--batch 96] [--ranks 1,2]

Each rank count runs as `mpiexec -n N python benchmarks/distributed.py --worker`: the digits CNN under
DistributedDataParallel, eager, one global batch of `--batch` images split across the ranks; the median
step time, and the median time of one all-reduce of the CNN's gradient bytes (verigrad's: gather to all
then the sum in rank order). PyTorch's gloo all-reduce of the same bytes, between the same processes, is
the peer (when torch is installed). Latency alpha is the median all-reduce of one float at 2 ranks;
bandwidth B is from MPI's all-gather of 16 MiB at 2 ranks (each rank
receives 16 MiB; no tensor copies). The model of N nodes:

    ring all-reduce (the bandwidth-optimal schedule)  2(N-1)/N * bytes / B + 2(N-1) * alpha
    verigrad's: over 64 KiB a reduce-scatter and an all-gather, the ring's volume and latency;
    up to 64 KiB a gather to all                        (N-1) * bytes / B + (N-1) * alpha

and a step of N nodes as the 1-rank step's compute divided by N plus the communication, none
overlapped (an upper bound: DDP overlaps the buckets with the backward pass)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
NODES = (1, 2, 4, 8, 16, 32, 64)
SPLIT_BYTES = 64 << 10  # verigrad.distributed.comm's


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent))
    import verigrad as vg
    import verigrad.distributed as dist
    from verigrad.distributed.comm import all_gather_arrays
    from verigrad.models import digits_cnn
    from verigrad.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    vg.set_threads(1)
    r, n = dist.get_rank(), dist.get_world_size()
    vg.manual_seed(0)
    model = DDP(digits_cnn(8, 8))
    opt = vg.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = vg.nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    k = args.batch // n
    x = vg.tensor(rng.standard_normal((args.batch, 1, 8, 8)).astype(np.float32)[r * k : (r + 1) * k])
    y = vg.tensor(rng.integers(0, 10, args.batch)[r * k : (r + 1) * k])

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    dist.barrier()
    step_s = statistics.median(_median_s(step, args.steps) for _ in range(args.repeats))
    grad_bytes = sum(p.numpy().nbytes for p in model.parameters())
    flat = vg.zeros(grad_bytes // 4)
    comm_s = _median_s(lambda: dist.all_reduce(flat), args.repeats * args.steps)
    one = vg.zeros(1)
    alpha_s = _median_s(lambda: dist.all_reduce(one), 200)
    big = np.zeros(16 << 20, np.uint8)  # the transfer alone (no tensor copies): MPI's all-gather
    gather_s = _median_s(lambda: all_gather_arrays(big, "bandwidth"), args.repeats)
    result = {"ranks": n, "step_s": step_s, "comm_s": comm_s, "alpha_s": alpha_s, "grad_bytes": grad_bytes}
    result["bandwidth"] = (n - 1) * (16 << 20) / max(gather_s - (n - 1) * alpha_s, 1e-9) if n > 1 else None
    try:
        import torch
        import torch.distributed as tdist
    except ImportError:
        torch = None
    if torch is not None and n > 1:
        torch.set_num_threads(1)
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=r, world_size=n)
        tflat = torch.zeros(grad_bytes // 4)
        result["torch_comm_s"] = _median_s(lambda: tdist.all_reduce(tflat), args.repeats * args.steps)
        tdist.destroy_process_group()
    if r == 0:
        print("RESULT " + json.dumps(result), flush=True)


def run_ranks(n: int, args: argparse.Namespace) -> dict:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("mpiexec is not on PATH: pip install 'verigrad[distributed]'")
    command = [mpiexec, "-n", str(n), sys.executable, __file__, "--worker", *sys.argv[1:]]
    env = {**os.environ, "VERIGRAD_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.exit(f"{n} ranks failed:\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=96)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--port", type=int, default=29517)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    sys.path.insert(0, str(HERE))
    from _common import console, describe_machine, table

    out = console(120)
    out.print(describe_machine())
    results = [run_ranks(int(n), args) for n in args.ranks.split(",")]
    measured = table(
        "The digits CNN under DDP, eager, 1 thread a rank",
        ["ranks", "step ms", "all-reduce ms", "PyTorch gloo all-reduce ms", "ratio"],
    )
    for res in results:
        torch_ms = res.get("torch_comm_s")
        measured.add_row(
            str(res["ranks"]),
            f"{res['step_s'] * 1e3:.2f}",
            f"{res['comm_s'] * 1e3:.3f}" if res["ranks"] > 1 else "-",
            f"{torch_ms * 1e3:.3f}" if torch_ms else "-",
            f"{res['comm_s'] / torch_ms:.2f}x" if torch_ms else "-",
        )
    out.print(measured)
    pair = next((res for res in results if res["ranks"] > 1), None)
    if pair is None:
        return
    alpha, bandwidth, step1 = pair["alpha_s"], pair["bandwidth"], results[0]["step_s"]
    out.print(
        f"measured: latency alpha {alpha * 1e6:.1f} us, bandwidth {bandwidth / 1e9:.2f} GB/s, gradient "
        f"{pair['grad_bytes'] / 1e3:.1f} kB, 1-rank step {step1 * 1e3:.2f} ms"
    )
    models = (("the digits CNN", pair["grad_bytes"], step1), ("a 124M-parameter GPT", 496e6, None))
    for name, size, compute in models:
        columns = ["nodes", "ring all-reduce ms", "verigrad's schedule ms"]
        columns += ["step ms (ring, no overlap)", "speedup"] if compute else []
        model = table(f"Model of N nodes: {name}, {size / 1e6:.3g} MB of f32 gradients", columns)
        for nodes in NODES:
            ring = 2 * (nodes - 1) / nodes * size / bandwidth + 2 * (nodes - 1) * alpha
            ours = (nodes - 1) * size / bandwidth + (nodes - 1) * alpha if size <= SPLIT_BYTES else ring
            cells = [str(nodes), f"{ring * 1e3:.3f}", f"{ours * 1e3:.3f}"]
            if compute:
                step = compute / nodes + ring
                cells += [f"{step * 1e3:.2f}", f"{compute / step:.2f}x"]
            model.add_row(*cells)
        out.print(model)


if __name__ == "__main__":
    main()
