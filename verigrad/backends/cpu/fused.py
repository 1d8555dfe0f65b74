"""Fused element-wise kernels: one C function per fused group (ir/passes/fuse.py `FusedGroup`), generated
from its members (fused_source.py writes the C; this module builds, loads and calls it), that computes
the group's root for every output element in one pass.

Each member's result is held in a variable of its dtype's C type, so it is rounded to that dtype exactly
as `FusedGroup.reference` converts after each member; its operands are first converted to the dtype its
reference computes in, as the reference converts them. The exactly rounded ops (add, sub, mul, div,
sqrt, ...), the selections (maximum, minimum, relu, where: NumPy's NaN rules, as in elementwise.c) and
the conversions are IEEE operations, built without FMA contraction; the transcendentals are
elementwise.c's formulas (vg_math.h) in double, rounded once. So a fused kernel gives the reference's
bits, and is stated EXACT (a native build, with contraction, states build.contracted's tolerance): a
group is fused only where every member is stated exact here. A member with a routine the C library
computes as NumPy does (elementwise.py's probe) calls the C library; one whose routine NumPy computes
with its own (exp, log, tanh, pow, .. on NumPy's AVX-512 builds: `staged_ops`) calls NumPy's loop, handed
to each generated library when it loads: the block is then computed in stages of STAGE elements, each
member into an array of its own, a staged member's arguments first, then NumPy's loop over them, then
the rest of its formula (elementwise.c's block routine; a member computed once per call calls the loop
on its one value). In a native build no such routine is stated exact. An f32 member of
`VECTOR_MEMBERS` (exp, sigmoid, tanh, silu, gelu_tanh, gelu, gelu_deriv: elementwise.c's vector paths)
calls the main library's kernel over a stage (VECTOR_STAGE elements; handed to each generated library
when it loads): its path (AVX-512, AVX2 or the routine) gives the reference's bits, as the formula
does, several times faster. Other groups (a member or dtype not in `MEMBERS` and `C_TYPES`, f16,
integer arithmetic) get no kernel and run member by member; so do the plan's groups holding such an f32
op where its vector path runs (`libm_members`; a user's kernel keeps them: library_kernels.py).

Layouts: inputs of any element strides that broadcast to the output (stride 0 on broadcast dimensions),
collapsed to rank 4 at most; the output is a new C-contiguous array. The output's rows are walked in
blocks; in a block each input is read in place where its stride is 1, else copied (a broadcast value
repeated) into a small buffer, so the loop over a block is one vectorisable loop for any layout. Rows
of at most half a block (a bias over channels on small images: rows of H*W) go several to a block, each
input read in place where it is one run of memory in the output's order, else copied row by row: a
call per row cost more than the row's arithmetic (relu(x + bias) on 64x32x4x4: 38 us, now 20 us). Inputs
of one element as traced (an optimizer's step size, its bias correction `beta ** t`) and the members
that read only such values are computed once per call, before the loop, by the same statements. What
this does not take (rank over 4 after collapsing, a stride that is not a whole number of elements, an
array that is not an aligned ndarray of the traced dtype) runs `FusedGroup.fast`: the same bits.

Compilation: `kernel(backend, op)` returns a `FusedKernel` at once and adds its C function to a pending
batch; the first call of any pending kernel compiles the whole batch in one compiler call (build.py:
the same compiler, flags and disk cache, the library named by the hash of its source), so a plan's
fused kernels cost one build, and a later plan (or process) with the same groups finds them built.
Threads: the main library's pool (`vg_parallel_for`, handed to each generated library when it loads);
element-wise work gives the same bits for every thread count.
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
import threading
from typing import Any

import numpy as np

from ...dtypes import from_numpy_dtype
from ..kernel_table import EXACT, Exactness
from . import _ffi, elementwise, fastcall
from . import build as _build
from ._ffi import collapse
from .fused_source import (  # the generator's names, importable from here as before
    BLOCK,
    C_TYPES,
    FLOATS,
    LIBM,
    MEMBERS,
    PRELUDE,
    STAGE,
    VALUE_TYPES,
    VECTOR_MEMBERS,
    VECTOR_STAGE,
    Unsupported,
    body,
    function,
    uniform,
)

__all__ = [
    "BATCHES",
    "BLOCK",
    "C_TYPES",
    "FLOATS",
    "LIBM",
    "MEMBERS",
    "PRELUDE",
    "STAGE",
    "VALUE_TYPES",
    "VECTOR_MEMBERS",
    "VECTOR_STAGE",
    "Batches",
    "FusedKernel",
    "Unsupported",
    "body",
    "function",
    "kernel",
    "libm_members",
    "scalars",
    "staged_ops",
    "supported",
    "uniform",
    "use_numpy_loop",
]

# building and loading ------------------------------------------------------------------------------
_FN_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]


def use_numpy_loop(cdll: ctypes.CDLL, which: int, loop: Any, data: Any = None) -> None:
    """Have a generated library call `loop` (an address, or a numpy_loops.LOOP) for NumPy's routine
    `which` (the index of its name in numpy_loops.ROUTINES)."""
    use = cdll.vg_fused_use_numpy
    use.argtypes, use.restype = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    use(which, ctypes.cast(loop, ctypes.c_void_p), data)


class Batches:
    """The generated functions of the process: built (name -> ctypes function) and pending (name -> C
    text), compiled together at the first call of any pending one."""

    def __init__(self) -> None:
        self.built: dict[str, Any] = {}
        self.pending: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self.builds: list[dict[str, Any]] = []  # what each build was: build.py's info, and its functions
        self.libraries: list[ctypes.CDLL] = []  # the libraries built and loaded
        self._lock = threading.Lock()

    def add(self, name: str, text: str) -> None:
        with self._lock:
            if name not in self.built and name not in self.failed:
                self.pending[name] = text

    def get(self, name: str, parallel_for: int, vectors: tuple[int, ...]) -> Any:
        """The function `name` (building the pending batch if need be); None if its build failed.
        `parallel_for`: the main library's vg_parallel_for, `vectors`: its kernels of VECTOR_MEMBERS."""
        fn = self.built.get(name)
        if fn is not None:
            return fn
        with self._lock:
            if name in self.built or name in self.failed:
                return self.built.get(name)
            batch, self.pending = self.pending, {}
            source = PRELUDE + "\n".join(batch[n] for n in sorted(batch))
            try:
                cdll, info = _build.build("fused", source)
            except _build.BuildError as e:
                print(f"verigrad: fused kernels unavailable, running members: {e}", file=sys.stderr)
                self.failed.update(dict.fromkeys(batch, str(e)))
                return None
            init = cdll.vg_fused_init
            init.argtypes, init.restype = [ctypes.c_void_p], None
            init(parallel_for)
            self.libraries.append(cdll)
            for which, loop in enumerate(elementwise.NUMPY_LOOPS):
                use_numpy_loop(cdll, which, *loop)
            use = cdll.vg_fused_use_vector
            use.argtypes, use.restype = [ctypes.c_int, ctypes.c_void_p], None
            for which, address in enumerate(vectors):
                use(which, address)
            for n in batch:
                fn = getattr(cdll, n)
                fn.argtypes, fn.restype = _FN_ARGS, None
                self.built[n] = fn
            self.builds.append({**info, "functions": len(batch)})
            return self.built[name]


BATCHES = Batches()
_LIBM: dict[int, frozenset[tuple[str, str]]] = {}  # id(backend) -> its libm_members


# the kernel ----------------------------------------------------------------------------------------
def libm_members(backend: Any, faster_unfused: bool = True) -> frozenset[tuple[str, str]]:
    """The (op, dtype) pairs of the ops evaluated with C library routines that a group may hold: those
    whose cpu kernels are stated exact here, with the C library's routines alone (elementwise.py's
    C_LIBRARY_EXACT) or with NumPy's loops (then computed with them, `staged_ops`), but for the f32 ones
    with a vector path (elementwise.c) where it runs: their own kernels run them at full speed, and a
    fused kernel calls those kernels stage by stage (`VECTOR_MEMBERS`). `faster_unfused=False` keeps
    those too (a user kernel, which has no members to run unfused: library_kernels.py)."""
    vectorized = faster_unfused and backend.library is not None and elementwise.vectorized(backend.library)
    fast = elementwise.VECTORIZED if vectorized else ()
    numpy = elementwise.NUMPY_ROUTINES[0]
    return frozenset(
        (op, dtype)
        for (op, dtype), (_, exactness) in backend.registered().items()
        if op in LIBM
        and dtype in FLOATS
        and exactness.is_exact
        and (op in elementwise.C_LIBRARY_EXACT or (numpy and op in elementwise.ROUTINE_OF))
        and not (dtype == "f32" and op in fast)
    )


def staged_ops(libm: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The ops of `libm` a group computes with NumPy's loops: those whose C library routine is not
    NumPy's here, where elementwise.c has NumPy's loops."""
    if not elementwise.NUMPY_ROUTINES[0]:
        return frozenset()
    return frozenset(
        op for op, _ in libm if op in elementwise.ROUTINE_OF and op not in elementwise.C_LIBRARY_EXACT
    )


def supported(op: Any, libm: frozenset[tuple[str, str]]) -> str | None:
    """Why the group `op` gets no fused kernel (None: it gets one): its inputs' dtypes are not known, a
    member or dtype the generator does not take, or a C library op not in `libm` (`libm_members`)."""
    if not getattr(op, "inputs", ()):
        return "the inputs' dtypes are not known"
    for member, dtype in zip(op.ops, op.dtypes):
        if member.name in LIBM and (member.name, dtype.name) not in libm:
            return f"{member.name} in {dtype.name}: not exact here, or faster unfused"
    try:
        body(op, tuple(spec.dtype.name for spec in op.inputs))
    except Unsupported as e:
        return str(e)
    return None


class FusedKernel:
    """The group's generated C function (built at the first call) on the layouts it takes, else
    `FusedGroup.fast`. Called as the plan calls a fused kernel: `kernel(*arrays, params=...)`."""

    exactness: Exactness  # EXACT, but in a build with contraction (build.contracted)
    writes_into = True  # the plan may pass `out=`: an array of the result's spec, even an input

    def __init__(self, backend: Any, op: Any, name: str, lib: _ffi.Library) -> None:
        self.backend, self.op, self.name = backend, op, name
        roots = {op.dtypes[m].name for m in op.roots}
        coarsest = next((d for d in FLOATS if d in roots), None)  # FLOATS: f32 first
        self.exactness = _build.contracted(EXACT, coarsest, backend.contracting)
        self.inputs = tuple(spec.dtype.np for spec in op.inputs)
        self.scalar = scalars(op)
        self.out_dtypes = tuple(op.dtypes[m].np for m in op.roots)
        self.params_shape = any(m.name == "broadcast_to" for m in op.ops)  # the shape depends on params
        self.data = lib.data
        self._parallel_for = ctypes.cast(lib.cdll.vg_parallel_for, ctypes.c_void_p).value
        self._lib = lib
        self._call: Any = None  # see `_caller`
        self._function: Any = None  # the C function (ctypes), once built
        self._masks = tuple(d.itemsize - 1 for d in self.inputs)  # alignment
        self._layout_of = fastcall.layout_key()
        self._layouts: dict[Any, Any] = {}
        self._pointers = ctypes.c_void_p * len(op.inputs)  # the type of the inputs' pointer array
        self._targets = ctypes.c_void_p * len(op.roots)  # and of the results' (several results)

    def __repr__(self) -> str:
        return f"<fused kernel {self.name}: {'/'.join(m.name for m in self.op.ops)}>"

    def __call__(self, *arrays: np.ndarray, params: tuple, out: Any = None) -> Any:
        """The group's result, in a new array or written into `out` (which may be one of the inputs of
        the result's shape: each element is read before its result is written). A group of several
        results gives a tuple of them, `out` a tuple of arrays or Nones."""
        call = self._call
        if call is None:
            call = self._call = self._caller()
        if call == self._fallback:  # no C function
            return _ffi.into(call(*arrays, params=params), out)
        dtypes = self.out_dtypes
        outs = out if type(out) is tuple else (out,) * len(dtypes)
        key = self._key(arrays + outs)
        if key is None:  # not all arrays
            return _ffi.into(self._fallback(*arrays, params=params), out)
        if self.params_shape:
            key = (key, params)
        layout = self._layouts.get(key)
        if layout is None:
            layout = _ffi.remember(self._layouts, key, self._layout(arrays, outs, params))
        if layout is False:
            return _ffi.into(self._fallback(*arrays, params=params), out)
        shape, dims, n, usable = layout
        if not usable:  # an `out` the C function does not write into as it is: into new arrays first
            return _ffi.into(self(*arrays, params=params), out)
        if len(dtypes) > 1:
            target: Any = tuple([np.empty(shape, d) if o is None else o for o, d in zip(outs, dtypes)])
        else:
            target = np.empty(shape, dtypes[0]) if out is None else out
        if n and call(arrays, target, dims, _ffi.min_chunk(), self.backend.threads) is False:
            return _ffi.into(self._fallback(*arrays, params=params), target)
        return target

    def _key(self, items: tuple) -> Any:
        """What the layout of `items` (arrays and Nones) depends on: vg_call's `layout` bytes where it
        is loaded, else their shapes, strides, dtypes and flags; None where an item is neither."""
        if self._layout_of is not None:
            key = self._layout_of(items)
            if key is not None:
                return key
        try:
            return tuple(
                [None if a is None else (a.shape, a.strides, a.dtype, a.flags.carray) for a in items]
            )
        except AttributeError:
            return None

    def _caller(self) -> Any:
        """What calls the C function on (inputs, result(s), dims, min_chunk, threads): vg_call, which
        passes the tuples of arrays as arrays of their data pointers (`_pointers_of` where it cannot);
        without it, `_pointers_of`; `_fallback` where the function could not be built."""
        vectors = tuple(self._lib.address(f"vg_{name}_f32_range") for name in VECTOR_MEMBERS)
        self._function = BATCHES.get(self.name, self._parallel_for, vectors)
        if self._function is None:
            return self._fallback
        several = len(self.out_dtypes) > 1
        direct = fastcall.with_tuples(self._function, "ppiii" if several else "piiii", self._pointers_of)
        return direct or self._pointers_of

    def _pointers_of(self, arrays: tuple, target: Any, dims: Any, min_chunk: int, threads: int) -> Any:
        """The C function called with the arrays' data pointers gathered here; False (nothing done)
        where an input is not aligned to its item size."""
        data = self.data
        pointers = [data(a) for a in arrays]
        for pointer, mask in zip(pointers, self._masks):
            if pointer & mask:
                return False
        out = self._targets(*[data(o) for o in target]) if type(target) is tuple else data(target)
        self._function(self._pointers(*pointers), out, dims, min_chunk, threads)
        return None

    def _layout(self, arrays: tuple, outs: tuple, params: tuple) -> Any:
        """(output shape, the dims argument, the element count, whether every `outs` array is one the C
        function writes into as it is) for arrays of these shapes and strides; False where the C
        function does not take the inputs."""
        if any(type(a) is not np.ndarray for a in arrays) or tuple(a.dtype for a in arrays) != self.inputs:
            return False
        shape = tuple(self.op.shape_rule(*(a.shape for a in arrays), params=params))
        dims = collapse(shape, arrays)
        if dims is None or any(a.size != 1 for a, one in zip(arrays, self.scalar) if one):
            return False
        usable = all(o is None or _ffi.writable(o, shape, d) for o, d in zip(outs, self.out_dtypes))
        count = int(np.prod(shape, dtype=np.int64))
        return shape, (ctypes.c_int64 * len(dims))(*dims), count, usable

    def _fallback(self, *arrays: Any, params: tuple) -> Any:
        """The members' NumPy kernels (FusedGroup.fast for the arrays' dtypes): the same bits."""
        arrays = tuple(np.asarray(a) for a in arrays)
        dtypes = tuple(from_numpy_dtype(a.dtype) for a in arrays)
        return self.op.fast(self.op.dtypes[-1], dtypes, params)(*arrays)


def scalars(op: Any) -> tuple[bool, ...]:
    """Which inputs of the group are of one element (every dimension 1 as traced)."""
    return tuple(all(type(d) is int and d == 1 for d in spec.shape) for spec in op.inputs)


def kernel(backend: Any, op: Any, libm: frozenset[tuple[str, str]] | None = None) -> FusedKernel | None:
    """The fused kernel for the group `op` (its C function added to the pending batch), or None where
    the generator does not take it (the plan then runs its members). `libm`: the C library ops a group
    may hold (default: `libm_members`)."""
    lib = backend.library
    if lib is None:
        return None
    if libm is None:
        libm = _LIBM.get(id(backend))
        if libm is None:
            libm = _LIBM[id(backend)] = libm_members(backend)
    if not op.inputs:  # the inputs' dtypes are not known: no kernel (see `supported`)
        return None
    key = (_structure(op), libm)
    name = _NAMES.get(key)
    if name is None:
        name = _ffi.remember(_NAMES, key, _generate(op, libm))
    return FusedKernel(backend, op, name, lib) if name else None


_NAMES: dict[tuple, str] = {}  # a group's structure and the libm set -> its function's name ("": none)


def _structure(op: Any) -> tuple:
    """What a group's C function depends on: its members' names, wiring and dtypes, its inputs' dtypes
    and which of them are of one element, and its results (a new trace of the same step makes new
    FusedGroup objects of the same structure, which find their function without generating it again)."""
    return (
        tuple(m.name for m in op.ops),
        op.wiring,
        tuple(d.name for d in op.dtypes),
        tuple(spec.dtype.name for spec in op.inputs),
        scalars(op),
        op.roots,
    )


def _generate(op: Any, libm: frozenset[tuple[str, str]]) -> str:
    """The group's C function added to the pending batch; its name ("" where the generator does not
    take the group)."""
    if supported(op, libm) is not None:
        return ""
    inputs = tuple(spec.dtype.name for spec in op.inputs)
    text = function("NAME", op, inputs, scalars(op), staged_ops(libm))
    name = "vg_fused_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    BATCHES.add(name, text.replace("NAME", name))
    return name
