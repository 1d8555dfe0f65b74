"""Where a GGUF file's header keeps its numbers, for the fuzz tests that change them."""

from __future__ import annotations

from pathlib import Path

import gguf


def header_fields(path: Path) -> tuple[list[tuple[int, int]], list[str]]:
    """(where, width) of every 4- or 8-byte number of the file's header (counts, value types, lengths,
    scalar values, dims, tensor types, offsets), found with the gguf package's reader; and its keys."""
    reader = gguf.GGUFReader(path)
    base = reader.data.ctypes.data
    parts = [p for f in reader.fields.values() for p in f.parts]
    parts += [p for t in reader.tensors for p in t.field.parts]
    found = {
        (p.ctypes.data - base + i * p.itemsize, p.itemsize)
        for p in parts
        if p.itemsize in (4, 8) and p.dtype.kind in "ui"
        for i in range(p.size)
    }
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    return sorted(found), keys
