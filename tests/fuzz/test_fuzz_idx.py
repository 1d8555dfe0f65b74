"""MNIST IDX files mutated (bytes replaced, cut, inserted, header fields set to extremes), plain and gzipped:
`load_mnist` gives images and labels that are what an MNIST part is (28x28 images in [0, 1], digits 0-9,
as many of each), or a WeightFileError naming the file; never another exception."""

from __future__ import annotations

import gzip
import struct
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verigrad.data import load_mnist
from verigrad.data.datasets import IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC
from verigrad.errors import WeightFileError

N = 3
IMAGES = np.random.default_rng(0).integers(0, 256, (N, 28, 28), dtype=np.uint8)
LABELS = np.array([7, 0, 9], np.uint8)
SEEDS = {
    "t10k-images-idx3-ubyte": struct.pack(">I3I", IDX_IMAGES_MAGIC, N, 28, 28) + IMAGES.tobytes(),
    "t10k-labels-idx1-ubyte": struct.pack(">II", IDX_LABELS_MAGIC, N) + LABELS.tobytes(),
}
U32 = st.sampled_from([0, 1, 2, 3, 4, 27, 28, 29, 255, 256, 2**16, 2**31, 2**32 - 1])


def mutation() -> st.SearchStrategy:
    """A function bytes -> bytes."""
    at = st.integers(0, 2400)
    return st.one_of(
        st.builds(lambda i, b: lambda d: d[:i] + bytes([b]) + d[i + 1 :], at, st.integers(0, 255)),
        st.builds(lambda i: lambda d: d[:i], at),
        st.builds(lambda i, extra: lambda d: d[:i] + extra + d[i:], at, st.binary(min_size=1, max_size=8)),
        st.builds(
            lambda k, v: lambda d: d[: 4 + 4 * k] + struct.pack(">I", v) + d[8 + 4 * k :],
            st.integers(0, 2),
            U32,
        ),
        st.builds(
            lambda m: lambda d: struct.pack(">I", m) + d[4:], st.sampled_from([0x801, 0x803, 0x804, 0xD03, 0])
        ),
        st.builds(
            lambda i: lambda d: d[:i] + bytes([10 + i % 240]) + d[i + 1 :], st.integers(8, 10)
        ),  # a label
    )


@settings(
    max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(
    st.sampled_from(sorted(SEEDS)),
    st.lists(mutation(), min_size=1, max_size=3),
    st.booleans(),
)
def test_mutated_idx_files_load_as_mnist_or_are_refused_naming_the_file(target, mutations, gz):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for name, blob in SEEDS.items():
            if name == target:
                for m in mutations:
                    blob = m(blob)
            path = folder / (name + (".gz" if gz and name == target else ""))
            path.write_bytes(gzip.compress(blob) if path.suffix == ".gz" else blob)
        try:
            images, labels = load_mnist(folder, "test")
        except WeightFileError as e:
            assert f"{folder / target}" in str(e), str(e)
            return
    assert images.dtype == np.float32 and images.shape == (len(labels), 1, 28, 28)
    assert labels.dtype == np.int64 and ((labels >= 0) & (labels <= 9)).all()
    assert images.min() >= 0 and images.max() <= 1
