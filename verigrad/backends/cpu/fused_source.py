"""The C source of the fused element-wise kernels (fused.py, which builds, loads and calls them): `function`
writes one group's C function, `PRELUDE` the macros and entry points every generated library begins with.
What the C computes and why it gives the reference's bits (members, stages, layouts) is fused.py's
docstring."""

from __future__ import annotations

from string import Template
from typing import Any

from ...dtypes import as_dtype, promote
from . import elementwise

__all__ = [
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
    "Unsupported",
    "body",
    "function",
    "uniform",
]

BLOCK = 512  # elements per block (a buffer of this many per input, on the stack)
STAGE = 128  # elements per stage of a block with NumPy's routines (an array of this many per member)
# elements per stage of a block with VECTOR_MEMBERS but no NumPy routine: a call of the main library's
# kernel costs about 30 ns, but a longer stage reads more of a block at once (quick_gelu on 1M f32
# elements measured 1.24, 1.16 and 1.32 times silu's time with stages of 128, 256 and 512)
VECTOR_STAGE = 256

C_TYPES = {"bool": "uint8_t", "i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double"}
# the type of a value inside the loop: bool values as 32-bit ints (0 or 1), so that a loop mixing them
# with f32 values is vectorised
VALUE_TYPES = {**C_TYPES, "bool": "int32_t"}
FLOATS = ("f32", "f64")

# Float ops, computed in their result dtype T on operands a (and b) converted to it. "{f}": the f32
# suffix of the C library's routine where T is float.
_FLOAT_UNARY = {
    "neg": "-a",
    "abs": "fabs{f}(a)",
    "relu": "a < (T)0 ? (T)0 : a",
    "relu_deriv": "(T)(a > (T)0)",  # not a ? b : c, which GCC leaves a branch before a mul
    "sqrt": "sqrt{f}(a)",
    "rsqrt": "(T)1 / sqrt{f}(a)",
    "sigmoid_deriv": "a * ((T)1 - a)",
    "tanh_deriv": "(T)1 - a * a",
    "exp": "(T)d_exp((double)a)",
    "log": "(T)log((double)a)",
    "expm1": "(T)expm1((double)a)",
    "log1p": "(T)log1p((double)a)",
    "sin": "(T)sin((double)a)",
    "cos": "(T)cos((double)a)",
}
for _name in ("tanh", "sigmoid", "silu", "silu_deriv", "gelu", "gelu_deriv", "gelu_tanh", "gelu_tanh_deriv"):
    _FLOAT_UNARY[_name] = f"(T)d_{_name}((double)a)"  # vg_math.h
# add and mul of two NaNs give the first operand's on x86 (NumPy's contiguous loops: a's), but the
# compiler may put either operand first, and differently in a loop's vector body and its scalar tail, so
# the NaN an element got depended on where its block started, so on the thread count: b is replaced by a
# where a is a NaN (vg_nan_or, a select of bits: a conditional expression made GCC compute the operation
# twice, masked), so that the operands are then the same NaN (a NaN and a number give the NaN either way)
_FLOAT_BINARY = {
    "add": "a + vg_nan_or{f}(a, b)",
    "sub": "a - b",
    "mul": "a * vg_nan_or{f}(a, b)",
    "div": "a / b",
    "pow": "(T)d_pow((double)a, (double)b)",  # vg_math.h
    "maximum": "(a > b || isnan(a)) ? a : b",
    "minimum": "(a < b || isnan(a)) ? a : b",
}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGICAL = {"logical_and": "a && b", "logical_or": "a || b", "logical_not": "!a"}
# evaluated with the C library's routines: fused only where elementwise.py's probe found them exact here
LIBM = frozenset([*(n for n, e in _FLOAT_UNARY.items() if "double" in e), "pow"])
MEMBERS = frozenset([*_FLOAT_UNARY, *_FLOAT_BINARY, *_COMPARE, *_LOGICAL, "where", "cast", "broadcast_to"])
# f32 members computed by the main library's kernel (vg_<op>_f32, on its vector path where the machine has
# one, else its routine): stated exact (`libm_members`), it gives the reference's bits as the formula
# does, several times faster; handed to each generated library when it loads, numbered in this order
VECTOR_MEMBERS = elementwise.VECTORIZED


class Unsupported(Exception):
    """A member or dtype the generator does not take."""


# generating C --------------------------------------------------------------------------------------
def _convert(expr: str, src: str, dst: str) -> str:
    """`expr` of dtype `src` converted as NumPy's astype to `dst` converts (bool values are 0 or 1)."""
    if src == dst:
        return expr
    if dst == "bool":
        return f"({expr} != 0)"
    return f"({C_TYPES[dst]})({expr})"


def _member(name: str, out: str, args: list[tuple[str, str]], staged: frozenset[str] = frozenset()) -> str:
    """One member's C statement block: the value of `name` on `args` ((C variable, dtype) pairs) as its
    reference computes it, in a variable `r` of `out`'s C type; an op of `staged` with NumPy's routine
    (np_one_<op>: for one value, a member computed once per call). Unsupported where there is none."""
    if out not in C_TYPES or any(d not in C_TYPES for _, d in args):
        raise Unsupported(f"{name} on {', '.join(d for _, d in args)} giving {out}")
    if name == "broadcast_to":  # the same value; the kernel reads the input broadcast
        return f"r = {args[0][0]};"
    if name == "cast":
        if out not in ("bool", *FLOATS):
            raise Unsupported(f"cast to {out}")
        return f"r = {_convert(*args[0], out)};"
    if name == "where":
        (c, _), (a, da), (b, db) = args
        return f"r = {c} ? {_convert(a, da, out)} : {_convert(b, db, out)};"
    if name in _COMPARE:
        (a, da), (b, db) = args
        joined = promote(as_dtype(da), as_dtype(db)).name
        if joined not in C_TYPES:
            raise Unsupported(f"{name} in {joined}")
        return f"r = {_convert(a, da, joined)} {_COMPARE[name]} {_convert(b, db, joined)};"
    if name in _LOGICAL:
        if any(d != "bool" for _, d in args):
            raise Unsupported(f"{name} on non-bool operands")
        local = "".join(f"const int32_t {v} = {a}; " for v, (a, _) in zip("ab", args))
        return f"{local}r = {_LOGICAL[name]};"
    table = _FLOAT_UNARY if len(args) == 1 else _FLOAT_BINARY
    if out not in FLOATS or name not in table:
        raise Unsupported(f"{name} giving {out}")
    t = C_TYPES[out]
    expr = table[name].replace("{f}", "f" if out == "f32" else "").replace("(T)", f"({t})")
    if name in staged:
        expr = f"({t})np_one_{name}({', '.join(f'(double){v}' for v in 'ab'[: len(args)])})"
    local = "".join(f"const {t} {v} = {_convert(a, da, out)}; " for v, (a, da) in zip("ab", args))
    return f"{local}r = {expr};"


def body(
    op: Any,
    inputs: tuple[str, ...],
    members: Any = None,
    loads: Any = None,
    staged: frozenset[str] = frozenset(),
) -> list[str]:
    """The statements computing `members` (default: all) of the group into `m<j>` from the inputs `x<k>`
    (dtype names `inputs`), each input's statement in `loads` (index -> statement) just before its first
    use: GCC leaves a loop with a conversion of a comparison unvectorised when the loads come first.
    Unsupported for a member or dtype the generator does not take."""
    lines = []
    dtypes = [d.name for d in op.dtypes]
    pending = dict(loads or {})
    for m, (member, refs) in enumerate(zip(op.ops, op.wiring)):
        if member.name not in MEMBERS:
            raise Unsupported(member.name)
        args = [(f"x{k}", inputs[k]) if kind == "in" else (f"m{k}", dtypes[k]) for kind, k in refs]
        block = _member(member.name, dtypes[m], args, staged)
        if members is None or m in members:
            lines += [pending.pop(k) for kind, k in refs if kind == "in" and k in pending]
            value = VALUE_TYPES[dtypes[m]]
            lines.append(f"{value} m{m};")
            lines.append(f"{{ {value} r; {block} m{m} = r; }}")
    return lines


def uniform(op: Any, scalar: tuple[bool, ...]) -> tuple[list[bool], set[str]]:
    """Which members are the same for every element (they read only `scalar` inputs, of one element,
    and such members), and the names (`x<k>`, `m<j>`) of the uniform values the other members or the
    result read: those are computed once per call."""
    same: list[bool] = []
    for refs in op.wiring:
        same.append(all(scalar[k] if kind == "in" else same[k] for kind, k in refs))
    used = {f"m{m}" for m in op.roots if same[m]}
    for m, refs in enumerate(op.wiring):
        if not same[m]:
            used |= {
                f"{'x' if kind == 'in' else 'm'}{k}"
                for kind, k in refs
                if (scalar[k] if kind == "in" else same[k])
            }
    return same, used


_FUNCTION = Template("""/* $what */
typedef struct {
    $fields
} ${name}_u;
VG_CLONES static void ${name}_block(int64_t len, const ${name}_u *u, $args $outs) {
    $invariant
    $loop
}
/* rows of at most half a block: several to a call (chosen per call; inside the chunk's function, it made
 * the longer rows' loop slower) */
static void ${name}_short_rows(void *ctx, int64_t lo, int64_t hi) {
    const vg_fctx *p = (const vg_fctx *)ctx;
    const int64_t *d = p->dims, n1 = d[1], n2 = d[2], n3 = d[3];
    $start
    $flats
    for (int64_t i = lo; i < hi; i += VG_BLOCK) {
        const int64_t len = hi - i < VG_BLOCK ? hi - i : VG_BLOCK;
        for (int64_t at = 0; at < len;) {
            const int64_t seg = len - at < n3 - col ? len - at : n3 - col;
            $gathers
            at += seg;
            if ((col += seg) < n3) continue;
            col = 0;
            $advance
        }
        ${name}_block(len, (const ${name}_u *)p->u, $runs $multi_targets);
    }
}
static void ${name}_chunk(void *ctx, int64_t lo, int64_t hi) {
    const vg_fctx *p = (const vg_fctx *)ctx;
    const int64_t *d = p->dims, n1 = d[1], n2 = d[2], n3 = d[3];
    $start
    for (int64_t i = lo; i < hi;) {
        const int64_t end = hi - i < n3 - col ? hi : i + (n3 - col);
        $fills
        for (int64_t at = i; at < end; at += VG_BLOCK) {
            const int64_t len = end - at < VG_BLOCK ? end - at : VG_BLOCK, c = col + (at - i);
            $blocks
            ${name}_block(len, (const ${name}_u *)p->u, $pointers $targets);
        }
        i = end;
        col = 0;
        $advance
    }
}
void $name(const void *const *in, void *out, const int64_t *dims, int64_t min_chunk, int threads) {
    ${name}_u u = {0};
    {
        $prologue
    }
    vg_fctx p = {in, out, dims, &u};
    vg_chunk_fn rows = dims[3] * 2 <= VG_BLOCK ? ${name}_short_rows : ${name}_chunk;
    vg_par(dims[0] * dims[1] * dims[2] * dims[3], min_chunk, threads, rows, &p);
}
""")


# the next row: along i2, or the next i1 (i2 back to 0), or the next i0 (i1, i2 back to 0); each input's
# row pointer with it
_ADVANCE = (
    "if (++i2 < n2) {{{row} }} else if (i2 = 0, ++i1 < n1) {{{plane} }} else {{ i1 = 0, i0++;{block} }}"
)


def _vector(op: Any, m: int) -> bool:
    """Whether member `m` of the group is computed by the main library's f32 kernel (VECTOR_MEMBERS)."""
    return op.ops[m].name in VECTOR_MEMBERS and op.dtypes[m].name == "f32"


def _staged(
    op: Any,
    inputs: tuple[str, ...],
    per_element: set[int],
    staged: frozenset[str],
    varying: list[int],
    load: Any,
) -> str:
    """The block's loop where a member is computed with NumPy's routine (`staged`) or is an f32 op of
    `VECTOR_MEMBERS`: in stages, each member into an array of its own, one loop a member; a staged
    one's arguments first, then NumPy's loop over them, then the rest of its formula (elementwise.c's
    block routine, the same bits); a vector one by the main library's kernel over the stage (its bits
    are the reference's, as the formula's), on its operand's array where that is one of f32 values;
    then the results stored (the last member's stored at once where it is the one result). Stages of
    VG_STAGE elements where NumPy's loops run (their arrays are of doubles), else of the whole block:
    the kernel costs a call and a short vector's tail a stage."""
    dtypes = [d.name for d in op.dtypes]
    vector = {m for m in per_element if _vector(op, m)}
    numpy_loops = any(op.ops[m].name in staged for m in per_element - vector)
    stage = "VG_STAGE" if numpy_loops else "VG_VSTAGE"
    # the one result, computed last: stored as it is computed
    direct = op.roots[0] if len(op.roots) == 1 and op.roots[0] == max(per_element) else None

    def operands(refs: Any) -> str:
        """The declarations of a member's varying operands at element j of the stage."""
        decl = {}
        for kind, k in refs:
            if kind == "in" and k in varying:
                decl[("in", k)] = load(k, f"a{k}[s + j]")
            elif kind != "in" and k in per_element:
                decl[("m", k)] = f"const {VALUE_TYPES[dtypes[k]]} m{k} = M{k}[j];"
        return " ".join(decl.values())

    def array(kind: str, k: int) -> str | None:
        """The stage's f32 values of an operand as an array, where they are one: a member's, an input's."""
        if kind == "in":
            return f"a{k} + s" if k in varying and inputs[k] == "f32" else None
        return f"M{k}" if k in per_element and dtypes[k] == "f32" else None

    lines = [
        f"for (int64_t s = 0; s < len; s += {stage}) {{",
        f"    const int64_t n = len - s < {stage} ? len - s : {stage};",
    ]
    loop = "    for (int64_t j = 0; j < n; j++) {"
    for m in sorted(per_element):
        member, refs, out = op.ops[m], op.wiring[m], dtypes[m]
        args = [(f"x{k}", inputs[k]) if kind == "in" else (f"m{k}", dtypes[k]) for kind, k in refs]
        here, t = operands(refs), C_TYPES[out]
        into = "y0[s + j]" if m == direct else f"M{m}[j]"
        if m != direct:
            lines.append(f"    {VALUE_TYPES[out]} M{m}[{stage}];")
        if m in vector:
            _member(member.name, out, args)  # Unsupported where the plain member would be
            source = array(*refs[0])
            if source is None:
                source = f"A{m}"
                lines.append(f"    float A{m}[{stage}];")
                lines.append(f"{loop} {here} A{m}[j] = {_convert(*args[0], out)}; }}")
            target = "y0 + s" if m == direct else f"M{m}"
            index = VECTOR_MEMBERS.index(member.name)
            lines.append(f"    vg_vector[{index}]({source}, {target}, n);")
            continue
        if member.name not in staged:
            block = _member(member.name, out, args, staged)
            lines.append(f"{loop} {here} {VALUE_TYPES[out]} r; {block} {into} = r; }}")
            continue
        _member(member.name, out, args)  # Unsupported where the plain member would be
        a, b = (f"(double){_convert(v, d, out)}" for v, d in (args + args)[:2])
        if member.name == "pow":
            lines.append(f"    double A{m}[VG_STAGE], B{m}[VG_STAGE], R{m}[VG_STAGE];")
            lines.append(f"{loop} {here} A{m}[j] = {a}; B{m}[j] = {b}; }}")
            lines.append(f"    np_run(NP_power, A{m}, B{m}, R{m}, n);")
            lines.append(f"{loop} {into} = ({t})pow_rest(A{m}[j], B{m}[j], R{m}[j]); }}")
            continue
        name, routine = member.name, elementwise.ROUTINE_OF[member.name]
        rest = f"R{m}[j]" if name == routine else f"{name}_rest({a}, R{m}[j])"  # exp, log, ..: R itself
        lines.append(f"    double A{m}[VG_STAGE], R{m}[VG_STAGE];")
        lines.append(f"{loop} {here} A{m}[j] = {name}_arg({a}); }}")
        lines.append(f"    np_run(NP_{routine}, A{m}, 0, R{m}, n);")
        lines.append(f"{loop} {'' if name == routine else here} {into} = ({t}){rest}; }}")
    if direct is None:
        stores = " ".join(
            f"y{r}[s + j] = {f'M{m}[j]' if m in per_element else f'm{m}'};" for r, m in enumerate(op.roots)
        )
        lines.append(f"{loop} {stores} }}")
    return "\n    ".join([*lines, "}"])


def function(
    name: str,
    op: Any,
    inputs: tuple[str, ...],
    scalar: tuple[bool, ...],
    staged: frozenset[str] = frozenset(),
) -> str:
    """The C source of kernel `name` for the group `op` on inputs of dtypes `inputs`, those of one
    element where `scalar` says: `name(const void *const *in, void *out, const int64_t *dims,
    int64_t min_chunk, int threads)`, dims = {shape[0..3], then each input's element strides[0..3]}
    (the output's shape padded in front). Members reading only scalar inputs are computed once. A
    group of several results (`op.roots`) takes in `out` an array of their pointers, and its pointers
    are not `restrict`: a result may be written over an input that a later member of the element reads
    (with restrict, the compiler could read it again from memory after the store); the loop is marked
    free of dependences between elements instead (`VG_INDEPENDENT`), so that it is still vectorised."""
    same, used = uniform(op, scalar)
    restrict = "restrict " if len(op.roots) == 1 else ""
    dtypes = [d.name for d in op.dtypes]
    kind = {**{f"x{k}": d for k, d in enumerate(inputs)}, **{f"m{j}": d for j, d in enumerate(dtypes)}}
    used = sorted(used)
    varying = [k for k in range(len(inputs)) if not scalar[k]]
    types = {k: C_TYPES[inputs[k]] for k in varying}

    def load(k: int, at: str) -> str:
        return f"const {VALUE_TYPES[inputs[k]]} x{k} = {at}{' != 0' * (inputs[k] == 'bool')};"

    def targets(at: str) -> str:
        """The results' pointers at output element `at`."""
        if len(op.roots) == 1:
            return f"({C_TYPES[dtypes[op.roots[0]]]} *)p->out + {at}"
        cast = [f"({C_TYPES[dtypes[m]]} *)((void *const *)p->out)[{r}]" for r, m in enumerate(op.roots)]
        return ", ".join(f"{c} + {at}" for c in cast)

    scalars = [k for k in range(len(inputs)) if scalar[k]]
    prologue = [load(k, f"((const {C_TYPES[inputs[k]]} *)in[{k}])[0]") for k in scalars]
    prologue += body(op, inputs, {m for m in range(len(op.ops)) if same[m]}, staged=staged)
    per_element = {m for m in range(len(op.ops)) if not same[m]}
    prologue += [f"u.{v} = {v};" for v in used]
    if any(op.ops[m].name in staged or _vector(op, m) for m in per_element):
        loop = _staged(op, inputs, per_element, staged, varying, load)
    else:
        plain = body(op, inputs, per_element, {k: load(k, f"a{k}[j]") for k in varying}, staged)
        loop = "\n    ".join(
            ["VG_INDEPENDENT" if len(op.roots) > 1 else "", "for (int64_t j = 0; j < len; j++) {"]
            + [f"    {line}" for line in plain + [f"y{r}[j] = m{m};" for r, m in enumerate(op.roots)]]
            + ["}"]
        )
    return _FUNCTION.substitute(
        what=f"{'/'.join(m.name for m in op.ops)} on {', '.join(inputs)}",
        name=name,
        outs=", ".join(f"{C_TYPES[dtypes[m]]} *{restrict}y{r}" for r, m in enumerate(op.roots)),
        loop=loop,
        targets=targets("at"),
        fields="\n    ".join([f"{VALUE_TYPES[kind[v]]} {v};" for v in used] or ["char unused;"]),
        args="".join(f"const {types[k]} *{restrict}a{k}, " for k in varying),
        invariant="\n    ".join(f"const {VALUE_TYPES[kind[v]]} {v} = u->{v};" for v in used),
        start="\n    ".join(
            [f"{types[k]} b{k}[VG_BLOCK];" for k in varying]
            + [
                "const int64_t first = lo / n3, r = first / n2;",
                "int64_t col = lo - first * n3, i2 = first % n2, i1 = r % n1, i0 = r / n1;",
            ]
            + [f"VG_ROW({types[k]}, {k})" for k in varying]
        ),
        advance=_ADVANCE.format(
            row="".join(f" VG_NEXT_ROW({k})" for k in varying),
            plane="".join(f" VG_NEXT_PLANE({k})" for k in varying),
            block="".join(f" VG_NEXT_BLOCK({k})" for k in varying),
        ),
        fills="\n        ".join(f"int64_t f{k} = 0;" for k in varying),
        blocks="\n            ".join(f"VG_BLOCK_OF({types[k]}, {k})" for k in varying),
        pointers="".join(f"p{k}, " for k in varying),
        flats="\n    ".join(f"const int flat{k} = VG_FLAT({k});" for k in varying),
        gathers="\n            ".join(f"VG_GATHER({types[k]}, {k})" for k in varying),
        runs="".join(f"flat{k} ? (const {types[k]} *)p->in[{k}] + i : b{k}, " for k in varying),
        multi_targets=targets("i"),
        prologue="\n        ".join(prologue),
    )


PRELUDE = f"""/* Fused element-wise kernels generated by verigrad/backends/cpu/fused.py. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vg.h"
#include "vg_math.h"
#include "vg_numpy.h"

#define VG_BLOCK {BLOCK}
#define VG_STAGE {STAGE}
#define VG_VSTAGE {VECTOR_STAGE}

/* a where a is a NaN, else b (fused.py's _FLOAT_BINARY: add's and mul's second operand) */
#define VG_NAN_OR(NAME, T, U)                                                      \\
    static inline __attribute__((unused)) T NAME(T a, T b) {{                      \\
        U ua, ub, m = (U)0 - (U)(a != a);                                          \\
        memcpy(&ua, &a, sizeof ua);                                                \\
        memcpy(&ub, &b, sizeof ub);                                                \\
        ua = (ua & m) | (ub & ~m);                                                 \\
        memcpy(&a, &ua, sizeof a);                                                 \\
        return a;                                                                  \\
    }}
VG_NAN_OR(vg_nan_orf, float, uint32_t)
VG_NAN_OR(vg_nan_or, double, uint64_t)

/* NumPy's loop `which` (vg_numpy.h's NP_exp ..), handed over when the library loads */
int vg_fused_use_numpy(int which, void *loop, void *data) {{ return np_use(which, loop, data); }}

/* The main library's f32 kernels of fused.py's VECTOR_MEMBERS (vg_exp_f32 ..), handed over when the
 * library loads; called on one thread over a stage (the chunk is already one thread's) */
typedef void (*vg_vector_fn)(const float *x, float *y, int64_t n);
static vg_vector_fn vg_vector[{len(VECTOR_MEMBERS)}];
void vg_fused_use_vector(int which, vg_vector_fn fn) {{ vg_vector[which] = fn; }}

/* A loop whose elements are independent (an element's results may be stored over its own inputs) */
#if defined(__clang__)
#define VG_INDEPENDENT _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define VG_INDEPENDENT _Pragma("GCC ivdep")
#else
#define VG_INDEPENDENT
#endif

typedef struct {{
    const void *const *in;
    void *out;
    const int64_t *dims;
    const void *u; /* the values that are the same for every element */
}} vg_fctx;

typedef void (*vg_parallel_fn)(int64_t n, int64_t min_chunk, int threads, vg_chunk_fn fn, void *ctx);
static vg_parallel_fn vg_par;

/* the main library's vg_parallel_for: this library is loaded on its own */
void vg_fused_init(vg_parallel_fn fn) {{ vg_par = fn; }}

/* Input I (of type T) at the chunk's first row of the output (i0, i1, i2, col...): where that row starts
 * (rI, then stepped row by row); fI (set for each row): how many elements of its buffer bI hold its
 * value where it is broadcast along the row */
#define VG_ROW(T, I) \\
    const T *r##I = (const T *)p->in[I] + i0 * d[4 + 4 * I] + i1 * d[5 + 4 * I] + i2 * d[6 + 4 * I];

/* rI to the next row: along i2, or to the next i1 (i2 back to 0), or to the next i0 (i1, i2 back to 0) */
#define VG_NEXT_ROW(I) r##I += d[6 + 4 * I];
#define VG_NEXT_PLANE(I) r##I += d[5 + 4 * I] - (n2 - 1) * d[6 + 4 * I];
#define VG_NEXT_BLOCK(I) r##I += d[4 + 4 * I] - (n1 - 1) * d[5 + 4 * I] - (n2 - 1) * d[6 + 4 * I];

/* Whether input I's elements are one run of memory in the output's order (its strides those of a
 * C-contiguous array of the output's shape, where a dimension is longer than 1) */
#define VG_FLAT(I)                                                                 \
    ((d[7 + 4 * I] == 1 || n3 == 1) && (d[6 + 4 * I] == n3 || n2 == 1) &&         \
     (d[5 + 4 * I] == n2 * n3 || n1 == 1) && (d[4 + 4 * I] == n1 * n2 * n3 || d[0] == 1))

/* Input I's elements [col, col + seg) of the row at rI into bI + at, where it is not one run of memory */
#define VG_GATHER(T, I)                                                            \
    if (!flat##I) {{                                                               \
        const int64_t s = d[7 + 4 * I];                                            \
        T *to = b##I + at;                                                         \
        if (s == 0) {{                                                             \
            const T v = r##I[0];                                                   \
            for (int64_t t = 0; t < seg; t++) to[t] = v;                           \
        }} else if (s == 1) {{                                                     \
            for (int64_t t = 0; t < seg; t++) to[t] = r##I[col + t];               \
        }} else {{                                                                 \
            for (int64_t t = 0; t < seg; t++) to[t] = r##I[(col + t) * s];         \
        }}                                                                         \
    }}

/* Input I in the block [c, c + len) of the row: pI, in place (stride 1) or copied into bI */
#define VG_BLOCK_OF(T, I)                                                          \\
    const T *p##I = b##I;                                                          \\
    {{                                                                             \\
        const int64_t s = d[7 + 4 * I];                                            \\
        if (s == 1)                                                                \\
            p##I = r##I + c;                                                       \\
        else if (s == 0)                                                           \\
            for (; f##I < len; f##I++) b##I[f##I] = r##I[0];                       \\
        else                                                                       \\
            for (int64_t t = 0; t < len; t++) b##I[t] = r##I[(c + t) * s];         \\
    }}
"""
