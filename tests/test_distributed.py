"""verigrad.distributed: the process group's errors, the rank-order reduction, the collectives as ops
(one process), and the collectives on 2 and 3 ranks under mpiexec (tests/distributed/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verigrad as vg
import verigrad.distributed as dist
from verigrad.distributed import DistributedError, ReduceOp, ordered_reduce, reduce_reference

ROOT = Path(__file__).resolve().parent.parent


def mpirun(n: int, module: str, *args: str, timeout: float = 60, env: dict | None = None):
    """`mpiexec -n n python -m module args` from the repository root; the completed process."""
    pytest.importorskip("mpi4py")
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH (pip install 'verigrad[distributed]')")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "VERIGRAD_THREADS": "1", **(env or {})}
    return subprocess.run(
        [mpiexec, "-n", str(n), sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_importing_verigrad_does_not_import_mpi4py():
    code = "import sys, verigrad, verigrad.distributed; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_refused_backends_and_uninitialized_group():
    for backend in ("gloo", "nccl"):
        with pytest.raises(DistributedError, match=r"backend '.*' .* use backend='mpi'"):
            dist.init_process_group(backend)
    with pytest.raises(DistributedError, match="unknown backend 'tcp'"):
        dist.init_process_group(backend="tcp")
    assert not dist.is_initialized()
    with pytest.raises(
        ValueError, match=r"has not been initialized, please make sure to call init_process_group"
    ):
        dist.get_rank()
    with pytest.raises(DistributedError, match="not been initialized"):
        dist.all_reduce(vg.ones(2))


def test_reduce_reference_sums_in_rank_order():
    a, b, c = (np.array([x], np.float32) for x in (1e8, -1e8, 1.0))
    assert reduce_reference([a, b, c])[0] == np.float32(1.0)  # (a + b) + c
    assert reduce_reference([c, a, b])[0] == np.float32(0.0)  # (c + a) + b: c is lost
    assert reduce_reference([a, b, c], ReduceOp.MAX)[0] == np.float32(1e8)
    avg = reduce_reference([a, c, c], "avg")
    assert avg.dtype == np.float32 and avg[0] == np.float32(1e8 + 2) / np.float32(3)
    with pytest.raises(ValueError, match=r"op must be one of ReduceOp.SUM"):
        reduce_reference([a], "mean")
    with pytest.raises(TypeError, match="AVG needs floating-point"):
        reduce_reference([np.array([1])], "avg")


@pytest.mark.parametrize("op", list(ReduceOp))
def test_ordered_reduce_gives_the_reference_bits(op):
    rng = np.random.default_rng(1)
    parts = [(rng.standard_normal(50) * 10.0 ** (4 * k)).astype(np.float32) for k in range(3)]
    got = ordered_reduce([vg.tensor(p) for p in parts], op).numpy()
    assert got.tobytes() == reduce_reference(parts, op).tobytes()


def test_collective_ops_on_one_process_are_the_identity():
    x = vg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    for y in (dist.ops.all_reduce(x, op="avg"), dist.ops.all_gather(x), dist.ops.broadcast(x, src=0)):
        assert np.array_equal(y.numpy(), x.numpy())
    with pytest.raises(RuntimeError, match=r"all_reduce with ReduceOp.MAX has no gradient"):
        dist.ops.all_reduce(x, op="max").sum().backward()
    with pytest.raises(ValueError, match=r"broadcast: src must be a rank in \[0, 1\), got 2"):
        dist.ops.broadcast(x, src=2)


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_on_several_ranks(n):
    out = mpirun(n, "tests.distributed.collectives")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"collectives ok {n}" in out.stdout


@pytest.mark.parametrize("kind", ["hang", "die"])
def test_a_rank_that_hangs_or_dies_stops_the_others(kind):
    start = time.monotonic()
    out = mpirun(2, "tests.distributed.faults", kind, env={"VERIGRAD_DIST_TIMEOUT": "2"}, timeout=60)
    assert out.returncode != 0
    assert "no fault seen" not in out.stdout
    assert time.monotonic() - start < 40
    if kind == "hang":
        assert "all_reduce(sum) did not complete within 2 s (VERIGRAD_DIST_TIMEOUT)" in out.stderr


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_gives_the_bits_of_one_process_summing_the_shards_in_rank_order(n):
    out = mpirun(n, "tests.distributed.ddp", timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"ddp ok {n}" in out.stdout


def test_ddp_needs_a_process_group_and_a_module():
    from verigrad.nn.parallel import DistributedDataParallel

    with pytest.raises(DistributedError, match="not been initialized"):
        DistributedDataParallel(vg.nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"module must be an nn\.Module, got int"):
        DistributedDataParallel(3)


def test_distributed_sampler_shuffles_one_permutation_split_across_ranks():
    from verigrad.utils.data import DistributedSampler

    def shares(epoch: int, drop_last: bool = False) -> list[list[int]]:
        out = []
        for r in range(3):
            s = DistributedSampler(range(10), num_replicas=3, rank=r, seed=5, drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    first = shares(0)
    assert [len(s) for s in first] == [4, 4, 4]
    interleaved = [i for k in range(4) for i in (first[0][k], first[1][k], first[2][k])]
    assert sorted(interleaved[:10]) == list(range(10)) and interleaved[10:] == interleaved[:2]  # padded
    assert shares(0) == first and shares(1) != first
    dropped = shares(1, drop_last=True)
    assert [len(s) for s in dropped] == [3, 3, 3] and len({i for s in dropped for i in s}) == 9
    with pytest.raises(DistributedError, match="not been initialized"):
        DistributedSampler(range(4))


@pytest.mark.parametrize("n", [2, 3])
def test_zero_redundancy_optimizer_gives_the_unsharded_bits_with_a_shard_of_the_state(n):
    out = mpirun(n, "tests.distributed.zero", timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"zero ok {n}" in out.stdout


def test_zero_partition_is_pytorchs_greedy_by_size():
    from verigrad.distributed.optim import partition

    assert partition([10, 40, 20, 30], 2) == [0, 0, 1, 1]  # 40 -> 0, 30 -> 1, 20 -> 1, 10 -> 0
    assert partition([5, 5, 5], 3) == [0, 1, 2]
    assert partition([1, 1], 4) == [0, 1]


SIMULATED: dict[tuple, bytes | dict] = {}  # one process's results, made once for the tests that share them


def _cnn_one_process(shards: int, folder: Path) -> bytes:
    from verigrad.cli import trainer

    if ("cnn", shards) not in SIMULATED:
        config = trainer.TrainConfig(epochs=1, batch_size=240, threads=1, shards=shards, out=str(folder))
        checkpoint = trainer.train(config).checkpoint
        assert trainer.load_model(checkpoint)[1].shards == shards
        SIMULATED["cnn", shards] = checkpoint.read_bytes()
    return SIMULATED["cnn", shards]


def _cnn_mpi(n: int, folder: Path, *extra: str) -> bytes:
    args = ("train", "--epochs", "1", "--batch-size", "240", "--threads", "1", "--out", str(folder), *extra)
    out = mpirun(n, "verigrad", *args, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("verigrad train") == 1  # rank 0 alone prints
    return (folder / "model.safetensors").read_bytes()


@pytest.mark.parametrize("n", [2, 3])
def test_cnn_trainer_on_n_ranks_one_shard_each_writes_the_bits_of_one_process(n, tmp_path):
    """DistributedDataParallel's path: the same checkpoint bytes as `verigrad train --shards n`."""
    assert _cnn_mpi(n, tmp_path / "mpi") == _cnn_one_process(n, tmp_path / "one")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_cnn_trainer_gives_the_same_bits_on_1_2_and_3_ranks(n, tmp_path):
    """Six shards a batch, computed by 1, 2 or 3 ranks: the checkpoint of one process."""
    assert _cnn_mpi(n, tmp_path / "mpi", "--shards", "6") == _cnn_one_process(6, tmp_path / "one")


def test_cnn_trainer_refuses_a_batch_the_shards_cannot_split(tmp_path):
    from verigrad.cli import data_parallel, trainer

    with pytest.raises(ValueError, match="--batch-size 50 is not divisible by the 3 shards"):
        trainer.prepare(trainer.TrainConfig(batch_size=50, shards=3, out=str(tmp_path)))
    assert not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="--shards must be a positive integer, got 0"):
        data_parallel.setup(0)


LM_ARGS = (
    *("--layers", "1", "--heads", "2", "--width", "16", "--context", "16", "--batch", "6"),
    *("--accumulate", "2", "--eval-every", "2", "--save-every", "2", "--vocab-size", "300"),
    *("--threads", "1", "--warmup", "1"),
)


def _lm_tensors(folder: Path) -> dict[str, bytes]:
    from verigrad.io import load

    return {k: v.numpy().tobytes() for k, v in load(folder / "lm.safetensors").items()}


def _lm(tmp_path: Path, out: str, steps: int, ranks: int, shards: int | None = None, resume: bool = False):
    """`verigrad train lm` on the test corpus: under mpiexec with `ranks` ranks (0: in one process
    without mpiexec); the checkpoint's tensors."""
    from tests.test_lm_train import write_corpus

    corpus = tmp_path / "corpus"
    if not corpus.exists():
        write_corpus(corpus)
    args = ["train", "lm", "--data", str(corpus), "--out", str(tmp_path / out), "--steps", str(steps)]
    args += [*LM_ARGS, *(["--resume"] if resume else []), *([f"--shards={shards}"] if shards else [])]
    if ranks:
        done = mpirun(ranks, "tests.distributed.lm", str(tmp_path / "cache"), *args, timeout=120)
        assert done.stdout.count("verigrad train lm") == 1 or done.returncode  # rank 0 alone prints
    else:
        command = [sys.executable, "-m", "tests.distributed.lm", str(tmp_path / "cache"), *args]
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return _lm_tensors(tmp_path / out)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_lm_trainer_gives_the_same_bits_on_1_2_and_3_ranks(n, tmp_path):
    """Six shards a batch (each micro-batch), computed by 1, 2 or 3 ranks: the weights and optimizer
    state of one process."""
    if ("lm", 6) not in SIMULATED:
        SIMULATED["lm", 6] = _lm(tmp_path, "one", 3, 0, shards=6)
    assert _lm(tmp_path, "mpi", 3, n, shards=6) == SIMULATED["lm", 6]


def test_lm_trainer_resumes_on_another_rank_count(tmp_path):
    """DistributedDataParallel's path (one shard a rank): 2 steps on 2 ranks, resumed on 3 for 2 more,
    against one process doing the same with --shards 2 then 3."""
    _lm(tmp_path, "mpi", 2, 2)
    mpi = _lm(tmp_path, "mpi", 4, 3, resume=True)
    _lm(tmp_path, "one", 2, 0, shards=2)
    assert mpi == _lm(tmp_path, "one", 4, 0, shards=3, resume=True)


def test_lm_trainer_refuses_a_batch_the_shards_cannot_split():
    from verigrad.cli.lm_trainer import LMTrainConfig

    with pytest.raises(ValueError, match="--batch 8 is not divisible by the 3 shards"):
        LMTrainConfig(batch=8, shards=3)
    with pytest.raises(ValueError, match=r"--dropout 0\.1 with 2 shards"):
        LMTrainConfig(batch=8, shards=2, dropout=0.1)


@settings(database=None, derandomize=True, max_examples=40, deadline=None)
@given(
    ranks=st.integers(1, 5),
    size=st.integers(0, 20),
    scale=st.integers(0, 8),
    op=st.sampled_from(list(ReduceOp)),
)
def test_ordered_reduce_is_the_rank_order_fold_for_any_rank_count(ranks, size, scale, op):
    rng = np.random.default_rng(ranks * 1000 + size * 10 + scale)
    parts = [
        (rng.standard_normal(size) * 10.0 ** rng.integers(0, scale + 1)).astype(np.float32)
        for _ in range(ranks)
    ]
    expected = parts[0].copy()
    for p in parts[1:]:
        expected = {"min": np.minimum, "max": np.maximum, "product": np.multiply}.get(op.value, np.add)(
            expected, p
        )
    if op is ReduceOp.AVG:
        expected = expected / np.float32(ranks)
    assert reduce_reference(parts, op).tobytes() == expected.astype(np.float32).tobytes()
    assert ordered_reduce([vg.tensor(p) for p in parts], op).numpy().tobytes() == expected.tobytes()
