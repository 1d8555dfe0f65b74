"""Hostile files, second round: each reader fuzzed with seeded mutations of valid files this test makes,
each case in a forked child under an address-space limit (tools/fuzz.py's `run_case`), so that a crash,
a hang or a huge allocation the file asks for is a failed case; headers cut at every byte; the classes of
damage the long fuzz found, one test each; writers stopped by a full disk (RLIMIT_FSIZE) in a child.

A case passes when it loads (and its values have their shapes, tokens give their text back, a template
renders) or is refused with a VerigradError; `tools/fuzz.py --cases N` runs the same fuzz longer."""

from __future__ import annotations

import importlib.util
import io
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from fresh_process import run_python
from gguf_header import header_fields

TOOL = Path(__file__).resolve().parent.parent / "tools" / "fuzz.py"
MEMORY_MIB = 512  # address space a child may take above what it starts with


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("verigrad_fuzz_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def formats(fuzz, tmp_path_factory):
    return fuzz.formats(tmp_path_factory.mktemp("seeds"))


def outcome(fuzz, load, path: Path):
    return fuzz.run_case(load, path, 20.0, MEMORY_MIB)


def clean(result) -> bool:
    return result.kind in ("loaded", "refused")


# every reader, seeded mutations --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, cases",
    [("gguf", 100), ("safetensors", 60), ("torch", 120), ("idx", 60), ("tokenizer", 60), ("templates", 60)],
)
def test_mutated_files_load_or_are_refused_cleanly(fuzz, formats, name, cases):
    tally = fuzz.fuzz(formats[name], cases, seed=49, time_limit=20.0, memory_mib=MEMORY_MIB, keep=None)
    assert set(tally.counts) <= {"loaded", "refused"}, tally.examples
    assert tally.counts.get("refused", 0) > 0  # the mutations reach the checks


def cuts(name: str, blob: bytes, path: Path) -> list[int]:
    """Where to cut a seed: at both ends of every number of a GGUF header and one byte into it; at every
    byte of a safetensors header's length and every fifth of its JSON; then every 61st byte of the data."""
    if name == "gguf":
        fields, _ = header_fields(path)
        found = {at for where, width in fields for at in (where, where + 1, where + width)}
        header_end = max(found)
    else:
        header_end = 8 + struct.unpack_from("<Q", blob)[0]
        found = {*range(8), *range(8, header_end, 5)}
    return sorted(found | set(range(header_end, len(blob), 61)))


@pytest.mark.parametrize("name", ["gguf", "safetensors"])
def test_a_file_cut_at_any_field_is_refused_naming_it(fuzz, formats, name, tmp_path):
    fmt = formats[name]
    blob = next(iter(fmt.seeds.values()))
    path = tmp_path / next(iter(fmt.seeds))
    path.write_bytes(blob)
    for cut in cuts(name, blob, path):
        path.write_bytes(blob[:cut])
        result = outcome(fuzz, fmt.load, path)
        assert result.kind == "refused" and str(path) in result.detail, (cut, result)


# PyTorch checkpoints ------------------------------------------------------------------------------------


def rezipped(blob: bytes, pickled: bytes) -> bytes:
    """The archive `blob` with its data.pkl replaced (the records' checksums right)."""
    source = zipfile.ZipFile(io.BytesIO(blob))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for info in source.infolist():
            data = pickled if info.filename.endswith("/data.pkl") else source.read(info)
            archive.writestr(info.filename, data)
    return out.getvalue()


def data_pkl(blob: bytes) -> bytes:
    archive = zipfile.ZipFile(io.BytesIO(blob))
    return archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))


@pytest.mark.parametrize("index", [2**32 - 1, 2**31, 2**28])
def test_a_huge_memo_index_in_the_pickle_is_refused_without_allocating(fuzz, formats, tmp_path, index):
    """pickle's C unpickler sized its memo table by the index a 5-byte LONG_BINPUT names (32 GiB)."""
    blob = formats["torch"].seeds["model.pt"]
    pickled = data_pkl(blob)
    at = pickled.index(b"r\x00\x00\x00\x00")  # the first tensor's memo slot
    pickled = pickled[:at] + b"r" + struct.pack("<I", index) + pickled[at + 5 :]
    path = tmp_path / "memo.pt"
    path.write_bytes(rezipped(blob, pickled))
    assert clean(result := outcome(fuzz, fuzz.load_torch, path)), result  # a memo in a dict: it loads


@pytest.mark.parametrize("size", [2**40, 2**31])
def test_a_huge_bytearray_in_the_pickle_is_refused_without_allocating(fuzz, formats, tmp_path, size):
    """BYTEARRAY8 (protocol 5): pickle's Python unpickler made the bytearray of the size the stream names
    before reading it."""
    path = tmp_path / "bytearray.pt"
    path.write_bytes(
        rezipped(formats["torch"].seeds["model.pt"], b"\x80\x05\x96" + struct.pack("<Q", size) + b".")
    )
    result = outcome(fuzz, fuzz.load_torch, path)
    assert result.kind == "refused" and "bytearray" in result.detail, result


def test_a_zip_whose_records_moved_before_its_start_is_refused(fuzz, formats, tmp_path):
    """Bytes cut from the first record: the directory's offsets, read from where the directory now is,
    point before the file's start, and zipfile seeks to a negative offset (an OSError, which was not the
    checkpoint's error)."""
    blob = formats["torch"].seeds["model.pt"]
    path = tmp_path / "moved.pt"
    path.write_bytes(blob[:100] + blob[300:])
    result = outcome(fuzz, fuzz.load_torch, path)
    assert result.kind == "refused" and str(path) in result.detail, result


def _tensor_then(pickled: bytes, tail: bytes) -> bytes:
    """The seed's data.pkl with its first tensor (the bytes from its rebuild call to its memo slot) put
    on the stack again, `tail` run on it, and the stack's top dropped before the end."""
    start = pickled.index(b"ctorch._utils\n_rebuild_tensor_v2\n")
    end = pickled.index(b"r\x00\x00\x00\x00") + 5
    return pickled[:-1] + pickled[start:end] + tail + b"0."


@pytest.mark.parametrize(
    "tail, says",
    [
        (b"K\x00K\x07s", "SETITEM on a Tensor"),  # x[0] = 7, into the storage the other tensors share
        (b"K\x07a", "APPEND on a Tensor"),
        (b"}X\x05\x00\x00\x00shapeK\x07sb", "BUILD on a Tensor"),  # x.__dict__["shape"] = 7
        (b"(K\x00K\x07u", "SETITEMS on a Tensor"),
    ],
    ids=["setitem", "append", "build", "setitems"],
)
def test_a_pickle_that_changes_a_tensor_in_place_is_refused(fuzz, formats, tmp_path, tail, says):
    """pickle's SETITEM, APPEND and BUILD call the object's own __setitem__, append or set its attributes:
    a file could write into a tensor (and the storage it shares) or give it another shape. They now run
    on dicts, lists, sets and OrderedDicts only, as torch's weights-only unpickler allows."""
    blob = formats["torch"].seeds["model.pt"]
    path = tmp_path / "in_place.pt"
    path.write_bytes(rezipped(blob, _tensor_then(data_pkl(blob), tail)))
    result = outcome(fuzz, fuzz.load_torch, path)
    assert result.kind == "refused" and says in result.detail, result


def test_a_pickle_that_changes_a_dtype_is_refused(fuzz, formats, tmp_path):
    """BUILD on torch.float32, verigrad's one f32 dtype object: its attributes were set for the whole
    process (its name here)."""
    blob = formats["torch"].seeds["model.pt"]
    tail = b"ctorch\nfloat32\n}X\x04\x00\x00\x00nameX\x03\x00\x00\x00f64sb0."
    path = tmp_path / "dtype.pt"
    path.write_bytes(rezipped(blob, data_pkl(blob)[:-1] + tail))
    result = outcome(fuzz, fuzz.load_torch, path)
    assert result.kind == "refused" and "BUILD on a DType" in result.detail, result


def test_a_state_dict_with_metadata_still_loads(formats, tmp_path):
    """The one BUILD torch.save writes: an OrderedDict's attributes (a state dict's _metadata)."""
    import verigrad

    body = b"\x80\x02ccollections\nOrderedDict\n)R}X\t\x00\x00\x00_metadata}sb(X\x01\x00\x00\x00aK\x01u."
    path = tmp_path / "metadata.pt"
    path.write_bytes(rezipped(formats["torch"].seeds["model.pt"], body))
    loaded = verigrad.load(path)
    assert loaded == {"a": 1} and loaded._metadata == {}


# the tokenizer's cache -----------------------------------------------------------------------------------


def test_a_damaged_tokenizer_cache_is_built_again_not_allocated(fuzz, formats, tmp_path, monkeypatch):
    """The BPE arrays cached as plain.npy: a header whose shape asks for 32 GB was allocated (MemoryError
    under a limit) before its size was compared with the file's; now the arrays are built again."""
    monkeypatch.setenv("VERIGRAD_TOKENIZER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tok.gguf"
    path.write_bytes(formats["tokenizer"].seeds["tok.gguf"])
    fuzz.load_tokenizer(path)  # writes the cache
    cached = sorted((tmp_path / "cache").rglob("plain.npy"))
    assert cached
    header = b"{'descr': '<i8', 'fortran_order': False, 'shape': (4000000000,), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    for file in cached:
        file.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(64))
    assert clean(result := outcome(fuzz, fuzz.load_tokenizer, path)) and result.kind == "loaded", result


@pytest.mark.parametrize("plain", [True, False], ids=["numpy_arrays", "library_files"])
def test_a_tokenizer_cache_changed_since_it_was_written_is_not_read(formats, tmp_path, monkeypatch, plain):
    """A value changed in a cached file (plain.npy's arrays, the library's vocab.json) was read as another
    tokenizer: "hello world" encoded as "hello!". Each file is now checked against its SHA-256."""
    import json

    from verigrad.io.tokenizer import Tokenizer

    monkeypatch.setenv("VERIGRAD_TOKENIZER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tok.gguf"
    path.write_bytes(formats["tokenizer"].seeds["tok.gguf"])
    texts = ["hello world", "héllo wörld 😀"]
    expected = [Tokenizer.from_gguf(path, plain=plain).encode(t, add_special=False) for t in texts]
    if plain:
        (file,) = (tmp_path / "cache").rglob("plain.npy")
        arrays = np.load(file)
        arrays[-5] = (arrays[-5] + 1) % 256  # where a merge leads, still a token of the vocabulary
        np.save(file, arrays)
    else:
        (file,) = (tmp_path / "cache").rglob("vocab.json")
        vocab = json.loads(file.read_text(encoding="utf-8"))
        first, second = next(k for k, i in vocab.items() if i == expected[0][0]), next(iter(vocab))
        vocab[first], vocab[second] = vocab[second], vocab[first]
        file.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    again = Tokenizer.from_gguf(path, plain=plain)
    assert [again.encode(t, add_special=False) for t in texts] == expected


# `verigrad train`'s checkpoint read back by `eval` -----------------------------------------------------


@pytest.mark.parametrize(
    "config, says",
    [
        ("[" * 100_000 + "]" * 100_000, "is not a `verigrad train` config"),  # was a RecursionError
        ('{"data": [1]}', "unknown data set"),  # these loaded, and failed in eval's data loading
        ('{"data": "\\ud800"}', "unknown data set"),
        ('{"out": 3}', "out must be a string"),
        ('{"data_dir": {"a": 1}}', "data_dir must be a string or None"),
        ('{"compiled": 0}', "compiled must be true or false"),
    ],
    ids=["deep", "data_list", "data_surrogate", "out_number", "data_dir_object", "compiled_number"],
)
def test_a_train_checkpoint_with_a_hostile_config_is_refused_naming_the_field(tmp_path, config, says):
    import verigrad
    from verigrad.cli.trainer import load_model
    from verigrad.models.cnn import digits_cnn

    path = tmp_path / "model.safetensors"
    meta = {"model": "digits_cnn", "height": "8", "width": "8", "config": config}
    verigrad.save(dict(digits_cnn(8, 8).state_dict()), path, metadata=meta)
    with pytest.raises(verigrad.WeightFileError, match="metadata field 'config'") as info:
        load_model(path)
    assert str(path) in str(info.value) and says in str(info.value)


# writers stopped by a full disk -------------------------------------------------------------------------

WRITE_UNDER_LIMIT = """
import resource, signal, sys
from pathlib import Path
import numpy as np
import verigrad
from verigrad.io.gguf_quantize import quantize_gguf

target, how, limit, ignore = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
state = {"w": np.arange(200_000, dtype=np.float32), "b": np.ones(3, np.float32)}
# ignored (Python's default): write() fails with EFBIG, as on a full disk; else the signal kills the process
signal.signal(signal.SIGXFSZ, signal.SIG_IGN if ignore else signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    if how == "gguf":
        quantize_gguf(sys.argv[5], target, "q8_0")
    else:
        verigrad.save(state, target)
except OSError as e:
    print("refused:", e)
    sys.exit(3)
"""


def temporaries(target: Path) -> list[str]:
    return [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


@pytest.mark.parametrize("suffix", [".safetensors", ".pt", ".gguf"])
@pytest.mark.parametrize("ignore_signal", [True, False], ids=["EFBIG", "SIGXFSZ"])
def test_a_write_stopped_by_a_full_disk_leaves_the_old_file_whole(tmp_path, formats, suffix, ignore_signal):
    """The old file stays whole under its name; a writer that saw the error removed its temporary, one
    that was killed leaves it to the next save of the same file, which writes the file whole."""
    import verigrad
    from verigrad.io.gguf_quantize import quantize_gguf

    target, old = tmp_path / f"out{suffix}", b"the previous file"
    target.write_bytes(old)
    source = tmp_path / "source.gguf"
    source.write_bytes(formats["gguf"].seeds["model.gguf"])
    script = tmp_path / "write.py"
    script.write_text(WRITE_UNDER_LIMIT)
    how, limit = (
        ("gguf", source.stat().st_size // 2) if suffix == ".gguf" else ("save", 100_000)
    )  # < its size
    argv = [str(script), str(target), how, str(limit), str(int(ignore_signal)), str(source)]
    done = run_python(
        f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    if ignore_signal:
        assert done.returncode == 3 and "refused:" in done.stdout, done.stderr[-2000:]
        assert temporaries(target) == []
    else:
        assert done.returncode == -25, done.stderr[-2000:]  # SIGXFSZ
        assert len(temporaries(target)) == 1
    assert target.read_bytes() == old
    if how == "gguf":
        quantize_gguf(source, target, "q8_0")
        assert set(verigrad.io.read_gguf(target).tensors) == set(verigrad.io.read_gguf(source).tensors)
    else:
        verigrad.save({"w": np.arange(200_000, dtype=np.float32)}, target)
        np.testing.assert_array_equal(
            verigrad.load(target)["w"].numpy(), np.arange(200_000, dtype=np.float32)
        )
    assert temporaries(target) == []
