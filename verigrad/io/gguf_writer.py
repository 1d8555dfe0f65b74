"""Writing a GGUF file like another one with new weights (a fine-tuned model's export), with the `gguf`
package's GGUFWriter: every metadata key of the source file with its value and GGUF type (the tokenizer,
the chat template, the hyperparameters), `general.file_type` set to the new type, and the new tensors in
the source's order: matrices as F16 or Q8_0 (llama.cpp's rounding, from the `gguf` package), vectors
(norms) as F32, as llama.cpp's converter stores them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, LlamaFileType
from gguf import quants as gguf_quants
from gguf.gguf_writer import WriterState

from ..errors import WeightFileError
from .atomic import write_atomically
from .gguf import _CheckedReader, read_gguf

TYPES = {
    "f16": (GGMLQuantizationType.F16, LlamaFileType.MOSTLY_F16),
    "q8_0": (GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
}
_SKIPPED = ("general.architecture", "general.alignment", "general.file_type")  # the writer's own


def stored_type(shape: tuple[int, ...], qtype: str) -> GGMLQuantizationType:
    """The type a tensor of `shape` is written as: F32 for vectors, else `qtype` (F16 where a Q8_0 row
    is not a whole number of blocks of 32)."""
    if len(shape) < 2:
        return GGMLQuantizationType.F32
    ggml = TYPES[qtype][0]
    return GGMLQuantizationType.F16 if ggml == GGMLQuantizationType.Q8_0 and shape[-1] % 32 else ggml


def write_like(
    path: str | os.PathLike, source: str | os.PathLike, tensors: dict[str, np.ndarray], qtype: str
) -> Path:
    """Write `tensors` (f32, by GGUF name: exactly the source file's) to `path` with the source's metadata;
    matrices as `qtype` ("f16" or "q8_0"), atomically (`write_gguf`)."""
    if qtype not in TYPES:
        raise ValueError(f"write_like: qtype must be one of {', '.join(TYPES)}, got {qtype!r}")
    original = read_gguf(source)  # checked first
    missing = [n for n in original.tensors if n not in tensors]
    extra = [n for n in tensors if n not in original.tensors]
    if missing or extra:
        raise WeightFileError(
            f"{source}: the new tensors differ from the file's (missing {missing[:3]}, extra {extra[:3]})"
        )
    for name, t in original.tensors.items():
        if tuple(tensors[name].shape) != t.shape:
            raise WeightFileError(
                f"{source}: tensor {name} has shape {t.shape}, the new one {tuple(tensors[name].shape)}"
            )
    reader = _CheckedReader(Path(source))
    path = Path(path)
    writer = GGUFWriter(None, original.arch)
    for key, types in reader.types.items():
        if key in _SKIPPED:
            continue
        main = GGUFValueType(types[0])
        sub = GGUFValueType(types[-1]) if main == GGUFValueType.ARRAY else None
        writer.add_key_value(key, reader.contents(key), main, sub)
    writer.add_file_type(int(TYPES[qtype][1]))
    for name in original.tensors:
        values = np.ascontiguousarray(tensors[name], dtype=np.float32)
        ggml = stored_type(values.shape, qtype)
        if ggml == GGMLQuantizationType.F32:
            writer.add_tensor(name, values)
        elif ggml == GGMLQuantizationType.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, gguf_quants.quantize(values, ggml), raw_dtype=ggml)
    write_gguf(writer, path)
    return path


def write_gguf(writer: GGUFWriter, path: Path) -> None:
    """The file `writer` holds (made with no path: its metadata and tensors added) written to `path`
    atomically (io/atomic.py: whole or not at all)."""

    def write(f: Any) -> None:
        writer.fout, writer.state = [f], WriterState.EMPTY  # GGUFWriter's open_output_file, on our file
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.flush()

    write_atomically(path, write)
