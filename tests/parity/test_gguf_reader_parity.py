"""read_gguf against the gguf package's own GGUFReader on the real SmolLM2 file: the same metadata (its
string arrays are decoded by verigrad's own reader) and the same tensors, names, shapes, types and bytes."""

from __future__ import annotations

import gguf
import numpy as np

from verigrad.io import read_gguf


def test_smollm2_metadata_and_tensors_equal_gguf_readers(smollm2_gguf):
    ours = read_gguf(smollm2_gguf)
    reader = gguf.GGUFReader(smollm2_gguf)
    expected = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata == expected
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152
    assert list(ours.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        mine = ours.tensors[t.name]
        assert mine.qtype == t.tensor_type.name.lower()
        assert mine.shape == tuple(int(d) for d in reversed(t.shape.tolist()))
        assert np.array_equal(mine.raw.reshape(-1).view(np.uint8), t.data.reshape(-1).view(np.uint8))
