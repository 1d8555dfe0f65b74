/* vg_call: a CPython extension that calls the library's kernels at a fraction of ctypes' cost per call
 * (ctypes converts each argument through its argtypes object by object: 2-4 us for a kernel's 5-8
 * arguments, more than a small kernel's work).
 *
 * `function(address, signature, returns, fallback)` makes a callable for a C function whose parameters
 * are integers or pointers ('i' in the signature: int64_t, int, void*) or doubles ('d'), returning
 * nothing (returns 0), an int (1) or an int64_t (2). A call converts each argument (a NumPy array as
 * its data pointer, a Python int, None as NULL, a ctypes array or structure by its address; a float or
 * an int for a double; for a 'p' parameter, a tuple of NumPy arrays and Nones, as the address of a C
 * array of their data pointers, each array's aligned to 8 bytes) and calls the function through a
 * pointer of type
 * int64_t (*)(int64_t x MAX_INTS, double x n): on the System V x86-64 and the AArch64 procedure call
 * standards (the only ones vg_call is built for, see ffi.py) integer and floating-point arguments take
 * their own registers in order, the integers past the registers take the stack's 8-byte slots in order,
 * and the caller removes what it pushed, so a function of fewer parameters reads exactly its own. An
 * argument of another kind goes to `fallback` (the ctypes function) with all the arguments.
 *
 * `Tape()` and `record(tape)`: while a tape records, each call this thread makes through a Function is
 * also kept on it (the converted arguments, the result, the argument objects held); `tape.run(start,
 * stop)` makes those calls again without Python, and `inputs` / `rebind` move the pointers into given
 * arrays to other arrays of their layouts (a compiled plan's replay: ir/replay.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_INTS 16
#define MAX_DOUBLES 4
#define MAX_ARGS (MAX_INTS + MAX_DOUBLES)
#define MAX_LISTS 2     /* 'p' parameters of a function */
#define MAX_POINTERS 64 /* arrays in a 'p' argument */

typedef int64_t I;
#define IS I, I, I, I, I, I, I, I, I, I, I, I, I, I, I, I /* MAX_INTS of them */
typedef I (*fn0)(IS);
typedef I (*fn1)(IS, double);
typedef I (*fn2)(IS, double, double);
typedef I (*fn3)(IS, double, double, double);
typedef I (*fn4)(IS, double, double, double, double);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *fn;
    Py_ssize_t nargs;
    char signature[MAX_ARGS];
    int returns;
    PyObject *fallback;
} Function;

/* A tape: the calls made while it records (`record`), each with its converted arguments and its result,
 * to be made again by `run` without Python (a plan's replay, ir/replay.py). It holds every argument
 * object of the calls it recorded, so the memory they point to lives as long as it does; the 'p'
 * argument arrays of pointers are copied into it. */
typedef struct {
    void *fn;
    int nd, returns;
    I ints[MAX_INTS];
    double doubles[MAX_DOUBLES];
    I result;
    I *lists;           /* the copied 'p' arrays (owned), or NULL */
    uint32_t arrays;    /* which of `ints` are arrays' data pointers (bit k: ints[k]) */
    int nl, lengths[MAX_LISTS]; /* the 'p' arrays' lengths */
} Record;

/* Where a tape's input array is pointed to (`inputs`): `ints[at]` of a record, or entry at - MAX_INTS of
 * its lists; at `offset` bytes into input `input`. */
typedef struct {
    Py_ssize_t record;
    int at, input;
    I offset;
} Patch;

typedef struct {
    PyObject_HEAD
    Record *records;
    Py_ssize_t n, cap;
    Py_ssize_t foreign; /* calls that went to `fallback` (ctypes) while recording: not on the tape */
    PyObject *held;     /* a list of the recorded calls' arguments */
    Patch *patches;     /* where the records point into the inputs (`inputs`, `rebind`) */
    Py_ssize_t npatches, ninputs;
} Tape;

static Tape *recording = NULL; /* the tape being recorded into (`record` holds a reference) */
static unsigned long recording_thread; /* the thread whose calls go onto it (others' calls do not) */

/* NumPy's array type and where an array object keeps its data pointer (set by `arrays`, from the
 * offset _ffi.py finds by probing): an array argument is passed as its data pointer, whatever its
 * strides, without a buffer request. */
static PyTypeObject *array_type = NULL;
static Py_ssize_t array_data = 0;

/* For `layout`: where an array object keeps its dimension count, shape, strides, dtype and flags, and
 * where a dtype keeps its type character and byte order (set by `layouts` once _ffi.py has checked
 * them against NumPy's own answers; 0: not set). */
static Py_ssize_t at_nd = 0, at_dims, at_strides, at_descr, at_flags, at_chars;
#define MAX_WORDS 1024
#define LAYOUT_FLAGS (0x1 | 0x100 | 0x400) /* NumPy's C_CONTIGUOUS, ALIGNED, WRITEABLE */

/* An array's data pointer, where `arrays` said an array object keeps it. */
static inline I data_of(PyObject *a) { return *(I *)((char *)a + array_data); }

static int integer(PyObject *a, I *out) {
    if (array_type != NULL && PyObject_TypeCheck(a, array_type)) { /* memmap too: the same object layout */
        *out = data_of(a);
        return 0;
    }
    if (PyLong_Check(a)) {
        *out = (I)PyLong_AsUnsignedLongLongMask(a); /* two's complement for negative values */
        return *out == -1 && PyErr_Occurred() ? -1 : 0;
    }
    if (a == Py_None) {
        *out = 0;
        return 0;
    }
    if (!PyObject_CheckBuffer(a)) return 1;
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_FORMAT | PyBUF_ND) != 0) {
        PyErr_Clear();
        return 1;
    }
    /* ctypes passes an array or a structure by its address (an array has dimensions, a structure's
     * format is T{...}); a pointer, a function pointer or a number by its value: those go to ctypes */
    int by_address = view.ndim > 0 || (view.format != NULL && view.format[0] == 'T' && view.format[1] == '{');
    *out = (I)(intptr_t)view.buf;
    PyBuffer_Release(&view);
    return by_address ? 0 : 1;
}

/* A 'p' argument: a tuple of arrays (aligned to 8 bytes) and Nones into `out`; 1 for another kind. */
static int pointers(PyObject *a, I *out) {
    if (array_type == NULL || !PyTuple_Check(a) || PyTuple_GET_SIZE(a) > MAX_POINTERS) return 1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(a); k++) {
        PyObject *item = PyTuple_GET_ITEM(a, k);
        if (item == Py_None) {
            out[k] = 0;
        } else if (PyObject_TypeCheck(item, array_type)) {
            out[k] = data_of(item);
            if (out[k] & 7) return 1;
        } else {
            return 1;
        }
    }
    return 0;
}

/* fn(ints..., doubles...) through a pointer of MAX_INTS integers and `nd` doubles (see the top). */
static inline I invoke(void *fn, const I *ints, const double *doubles, int nd) {
#define INTS ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7], ints[8], ints[9], \
             ints[10], ints[11], ints[12], ints[13], ints[14], ints[15]
    switch (nd) {
    case 0: return ((fn0)fn)(INTS);
    case 1: return ((fn1)fn)(INTS, doubles[0]);
    case 2: return ((fn2)fn)(INTS, doubles[0], doubles[1]);
    case 3: return ((fn3)fn)(INTS, doubles[0], doubles[1], doubles[2]);
    default: return ((fn4)fn)(INTS, doubles[0], doubles[1], doubles[2], doubles[3]);
    }
#undef INTS
}

/* A call just made, onto the tape: its arguments converted (the 'p' arrays copied, `list_at` says which
 * integers point to them), its result, and its argument objects held. */
static int keep(Tape *t, const Function *f, const I *ints, const double *doubles, int nd, const int *list_at,
                int nl, I result, PyObject *const *args, Py_ssize_t n) {
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 64;
        Record *grown = PyMem_Realloc(t->records, (size_t)cap * sizeof(Record));
        if (grown == NULL) return PyErr_NoMemory(), -1;
        t->records = grown, t->cap = cap;
    }
    Record *rec = &t->records[t->n];
    rec->fn = f->fn, rec->nd = nd, rec->returns = f->returns, rec->result = result, rec->lists = NULL;
    rec->arrays = 0, rec->nl = nl;
    for (Py_ssize_t k = 0, i = 0, j = 0; k < n; k++) {
        if (f->signature[k] == 'd') continue;
        if (f->signature[k] == 'p') rec->lengths[j++] = (int)PyTuple_GET_SIZE(args[k]);
        else if (array_type != NULL && PyObject_TypeCheck(args[k], array_type)) rec->arrays |= 1u << i;
        i++;
    }
    memcpy(rec->ints, ints, sizeof(rec->ints));
    memcpy(rec->doubles, doubles, sizeof(rec->doubles));
    if (nl > 0) {
        rec->lists = PyMem_Malloc((size_t)nl * MAX_POINTERS * sizeof(I));
        if (rec->lists == NULL) return PyErr_NoMemory(), -1;
        for (int j = 0; j < nl; j++) {
            memcpy(rec->lists + j * MAX_POINTERS, (const I *)(intptr_t)ints[list_at[j]], MAX_POINTERS * sizeof(I));
            rec->ints[list_at[j]] = (I)(intptr_t)(rec->lists + j * MAX_POINTERS);
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyList_Append(t->held, args[k]) < 0) return PyMem_Free(rec->lists), -1;
    t->n++;
    return 0;
}

/* The fallback (ctypes) with all the arguments; counted on a recording tape, which cannot hold it. */
static PyObject *foreign(Function *f, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (recording != NULL && PyThread_get_thread_ident() == recording_thread) recording->foreign++;
    return PyObject_Vectorcall(f->fallback, args, nargsf, kwnames);
}

static PyObject *call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Function *f = (Function *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n != f->nargs)
        return foreign(f, args, nargsf, kwnames); /* ctypes says what is wrong */
    I ints[MAX_INTS] = {0};
    double doubles[MAX_DOUBLES] = {0};
    I lists[MAX_LISTS][MAX_POINTERS];
    int ni = 0, nd = 0, nl = 0, list_at[MAX_LISTS];
    for (Py_ssize_t k = 0; k < n; k++) {
        if (f->signature[k] == 'd') {
            double v = PyFloat_AsDouble(args[k]);
            if (v == -1.0 && PyErr_Occurred()) return NULL;
            doubles[nd++] = v;
            continue;
        }
        if (f->signature[k] == 'p') {
            if (pointers(args[k], lists[nl])) return foreign(f, args, nargsf, NULL);
            list_at[nl] = ni;
            ints[ni++] = (I)(intptr_t)lists[nl++];
            continue;
        }
        int found = integer(args[k], &ints[ni++]);
        if (found < 0) return NULL;
        if (found > 0) return foreign(f, args, nargsf, NULL);
    }
    I r;
    Py_BEGIN_ALLOW_THREADS
    r = invoke(f->fn, ints, doubles, nd);
    Py_END_ALLOW_THREADS
    if (recording != NULL && PyThread_get_thread_ident() == recording_thread && keep(recording, f, ints, doubles, nd, list_at, nl, r, args, n) < 0) return NULL;
    if (f->returns == 0) Py_RETURN_NONE;
    if (f->returns == 1) return PyLong_FromLong((long)(int)r);
    return PyLong_FromLongLong((long long)r);
}

static void dealloc(PyObject *self) {
    Py_XDECREF(((Function *)self)->fallback);
    PyObject_Free(self);
}

static PyObject *plain_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static PyTypeObject FunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vg_call.Function",
    .tp_basicsize = sizeof(Function),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Function, vectorcall),
    .tp_call = plain_call,
    .tp_dealloc = dealloc,
    .tp_doc = "A C function called without ctypes' per-argument conversions.",
};

static PyObject *function(PyObject *module, PyObject *args) {
    unsigned long long address;
    const char *signature;
    int returns;
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "KsiO", &address, &signature, &returns, &fallback)) return NULL;
    size_t n = strlen(signature);
    int ni = 0, nd = 0, nl = 0;
    for (size_t k = 0; k < n; k++) {
        if (signature[k] == 'd') nd++;
        else if (signature[k] == 'i') ni++;
        else if (signature[k] == 'p') ni++, nl++;
        else return PyErr_Format(PyExc_ValueError, "signature %s: 'i', 'p' or 'd' only", signature);
    }
    if (ni > MAX_INTS || nd > MAX_DOUBLES || nl > MAX_LISTS || returns < 0 || returns > 2)
        return PyErr_Format(PyExc_ValueError, "signature %s (returns %d) is not supported", signature, returns);
    Function *f = PyObject_New(Function, &FunctionType);
    if (f == NULL) return NULL;
    f->vectorcall = call;
    f->fn = (void *)(uintptr_t)address;
    f->nargs = (Py_ssize_t)n;
    memcpy(f->signature, signature, n);
    f->returns = returns;
    Py_INCREF(fallback);
    f->fallback = fallback;
    return (PyObject *)f;
}

static PyObject *arrays(PyObject *module, PyObject *args) {
    PyObject *type;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "O!n", &PyType_Type, &type, &offset)) return NULL;
    if (offset < (Py_ssize_t)sizeof(PyObject) || offset % (Py_ssize_t)sizeof(void *))
        return PyErr_Format(PyExc_ValueError, "the data pointer cannot be at offset %zd", offset);
    Py_INCREF(type);
    Py_XDECREF((PyObject *)array_type);
    array_type = (PyTypeObject *)type;
    array_data = offset;
    Py_RETURN_NONE;
}

/* layout(tuple): bytes that say each item's layout (an array's dimension count, type character, byte
 * order, contiguity, alignment and writeability, shape and strides; None as itself), equal for two
 * tuples exactly when those are; None where an item is something else or `layouts` is not set. */
static PyObject *layout(PyObject *module, PyObject *arg) {
    if (at_nd == 0 || array_type == NULL || !PyTuple_Check(arg)) Py_RETURN_NONE;
    int64_t words[MAX_WORDS];
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(arg); k++) {
        PyObject *item = PyTuple_GET_ITEM(arg, k);
        if (item == Py_None) {
            if (n + 1 > MAX_WORDS) Py_RETURN_NONE;
            words[n++] = -1;
            continue;
        }
        if (!PyObject_TypeCheck(item, array_type)) Py_RETURN_NONE;
        const char *a = (const char *)item;
        int nd = *(const int *)(a + at_nd);
        if (nd < 0 || n + 1 + 2 * (Py_ssize_t)nd > MAX_WORDS) Py_RETURN_NONE;
        const unsigned char *chars = (const unsigned char *)*(char *const *)(a + at_descr) + at_chars;
        int flags = *(const int *)(a + at_flags) & LAYOUT_FLAGS;
        words[n++] = (int64_t)nd | (int64_t)chars[0] << 8 | (int64_t)chars[1] << 16 | (int64_t)flags << 24;
        const int64_t *dims = *(const int64_t *const *)(a + at_dims);
        const int64_t *strides = *(const int64_t *const *)(a + at_strides);
        for (int d = 0; d < nd; d++) {
            words[n++] = dims[d];
            words[n++] = strides[d];
        }
    }
    return PyBytes_FromStringAndSize((const char *)words, n * (Py_ssize_t)sizeof(int64_t));
}

static PyObject *layouts(PyObject *module, PyObject *args) {
    Py_ssize_t nd, dims, strides, descr, flags, chars;
    if (!PyArg_ParseTuple(args, "nnnnnn", &nd, &dims, &strides, &descr, &flags, &chars)) return NULL;
    at_nd = nd, at_dims = dims, at_strides = strides, at_descr = descr, at_flags = flags, at_chars = chars;
    Py_RETURN_NONE;
}

/* ---- tapes ---- */

static PyObject *tape_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (!PyArg_ParseTuple(args, ":Tape")) return NULL;
    Tape *t = (Tape *)type->tp_alloc(type, 0);
    if (t == NULL) return NULL;
    t->held = PyList_New(0);
    if (t->held == NULL) return Py_DECREF(t), NULL;
    return (PyObject *)t;
}

static void tape_dealloc(PyObject *self) {
    Tape *t = (Tape *)self;
    for (Py_ssize_t k = 0; k < t->n; k++) PyMem_Free(t->records[k].lists);
    PyMem_Free(t->records);
    PyMem_Free(t->patches);
    Py_XDECREF(t->held);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t tape_len(PyObject *self) { return ((Tape *)self)->n; }

/* run(start, stop): the records [start, stop) called again in order, without the GIL; -1 when each
 * returned what it returned when recorded, else the index of the first that did not (the records after
 * it are not called). */
/* The records [start, stop) of the (start, stop) in `args`: 0, or -1 with an exception set. */
static int record_range(const Tape *t, PyObject *args, Py_ssize_t *start, Py_ssize_t *stop) {
    if (!PyArg_ParseTuple(args, "nn", start, stop)) return -1;
    if (*start < 0 || *stop > t->n || *start > *stop)
        return PyErr_Format(PyExc_IndexError, "records [%zd, %zd) of a tape of %zd", *start, *stop, t->n), -1;
    return 0;
}

static PyObject *tape_run(PyObject *self, PyObject *args) {
    Tape *t = (Tape *)self;
    Py_ssize_t start, stop, k;
    if (record_range(t, args, &start, &stop) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    for (k = start; k < stop; k++) {
        const Record *rec = &t->records[k];
        I r = invoke(rec->fn, rec->ints, rec->doubles, rec->nd);
        if (rec->returns == 1 ? (int)r != (int)rec->result : rec->returns == 2 && r != rec->result) break;
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromSsize_t(k < stop ? k : -1);
}

/* The pointer a patch rewrites. */
static I *patched(Tape *t, const Patch *p) {
    Record *rec = &t->records[p->record];
    return p->at < MAX_INTS ? &rec->ints[p->at] : &rec->lists[p->at - MAX_INTS];
}

/* inputs(spans): where the records point into the inputs, spans ((data pointer, bytes), ...) of the
 * arrays the recording run was given (disjoint); `rebind` moves those pointers to other arrays. Gives the
 * number of pointers found. */
static PyObject *tape_inputs(PyObject *self, PyObject *arg) {
    Tape *t = (Tape *)self;
    if (!PyTuple_Check(arg)) return PyErr_Format(PyExc_TypeError, "inputs takes a tuple of (data, bytes)");
    Py_ssize_t m = PyTuple_GET_SIZE(arg);
    if (m > INT_MAX) return PyErr_Format(PyExc_ValueError, "inputs takes at most INT_MAX arrays");
    I *lo = PyMem_Malloc((size_t)(m + 1) * 2 * sizeof(I)), *hi = lo + m + 1;
    if (lo == NULL) return PyErr_NoMemory();
    for (Py_ssize_t j = 0; j < m; j++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(arg, j), "LL", &lo[j], &hi[j])) return PyMem_Free(lo), NULL;
        hi[j] += lo[j];
    }
    Py_ssize_t count = 0, cap = 0;
    Patch *patches = NULL;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        count = 0;
        for (Py_ssize_t r = 0; r < t->n; r++) {
            const Record *rec = &t->records[r];
            for (int at = 0; at < MAX_INTS + rec->nl * MAX_POINTERS; at++) {
                I v;
                if (at < MAX_INTS) {
                    if (!(rec->arrays >> at & 1)) continue;
                    v = rec->ints[at];
                } else {
                    int e = (at - MAX_INTS) % MAX_POINTERS, list = (at - MAX_INTS) / MAX_POINTERS;
                    if (e >= rec->lengths[list]) continue;
                    v = rec->lists[at - MAX_INTS];
                }
                for (Py_ssize_t j = 0; j < m; j++) {
                    if (v < lo[j] || v >= hi[j]) continue;
                    if (pass == 1) patches[count] = (Patch){r, at, (int)j, v - lo[j]};
                    count++;
                    break;
                }
            }
        }
        if (pass == 0) {
            cap = count;
            patches = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof(Patch));
            if (patches == NULL) return PyMem_Free(lo), PyErr_NoMemory();
        }
    }
    PyMem_Free(lo);
    PyMem_Free(t->patches);
    t->patches = patches, t->npatches = count, t->ninputs = m;
    return PyLong_FromSsize_t(count);
}

/* rebind(arrays): the pointers `inputs` found, moved to these arrays (as many, of the same layouts). */
static PyObject *tape_rebind(PyObject *self, PyObject *arg) {
    Tape *t = (Tape *)self;
    if (array_type == NULL || !PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != t->ninputs)
        return PyErr_Format(PyExc_TypeError, "rebind takes a tuple of %zd arrays", t->ninputs);
    /* a model's step takes an array per layer's cache and more: no fixed bound (a 32-layer model has 67) */
    I small[64], *data = t->ninputs <= 64 ? small : PyMem_Malloc((size_t)t->ninputs * sizeof(I));
    if (data == NULL) return PyErr_NoMemory();
    for (Py_ssize_t j = 0; j < t->ninputs; j++) {
        PyObject *a = PyTuple_GET_ITEM(arg, j);
        if (!PyObject_TypeCheck(a, array_type)) {
            if (data != small) PyMem_Free(data);
            return PyErr_Format(PyExc_TypeError, "rebind takes arrays");
        }
        data[j] = data_of(a);
    }
    for (Py_ssize_t k = 0; k < t->npatches; k++) {
        const Patch *p = &t->patches[k];
        *patched(t, p) = data[p->input] + p->offset;
    }
    if (data != small) PyMem_Free(data);
    Py_RETURN_NONE;
}

/* checked(start, stop): how many of the records [start, stop) return a value (which `run` compares). */
static PyObject *tape_checked(PyObject *self, PyObject *args) {
    Tape *t = (Tape *)self;
    Py_ssize_t start, stop, count = 0;
    if (record_range(t, args, &start, &stop) < 0) return NULL;
    for (Py_ssize_t k = start; k < stop; k++) count += t->records[k].returns != 0;
    return PyLong_FromSsize_t(count);
}

static PyObject *tape_foreign(PyObject *self, void *closure) { return PyLong_FromSsize_t(((Tape *)self)->foreign); }

static PyObject *tape_held(PyObject *self, void *closure) { return PyList_GetSlice(((Tape *)self)->held, 0, PY_SSIZE_T_MAX); }

/* tape.held = objects: what the tape keeps alive instead (the memory its records point to must stay:
 * a caller drops only what `rebind` points elsewhere before every run). */
static int tape_set_held(PyObject *self, PyObject *value, void *closure) {
    if (value == NULL || !PyList_Check(value)) return PyErr_SetString(PyExc_TypeError, "held takes a list"), -1;
    PyObject *copy = PyList_GetSlice(value, 0, PY_SSIZE_T_MAX);
    if (copy == NULL) return -1;
    Py_SETREF(((Tape *)self)->held, copy);
    return 0;
}

static PyMethodDef tape_methods[] = {
    {"run", tape_run, METH_VARARGS, "run(start, stop): make the recorded calls [start, stop) again"},
    {"inputs", tape_inputs, METH_O, "inputs(((data, bytes), ...)): find the pointers into these arrays"},
    {"rebind", tape_rebind, METH_O, "rebind(arrays): those pointers moved to these arrays"},
    {"checked", tape_checked, METH_VARARGS, "checked(start, stop): the records in range that return a value"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tape_getset[] = {
    {"foreign", tape_foreign, NULL, "calls that went to ctypes while recording (not on the tape)", NULL},
    {"held", tape_held, tape_set_held, "the objects the tape keeps alive (a new list; settable)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods tape_sequence = {.sq_length = tape_len};

static PyTypeObject TapeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vg_call.Tape",
    .tp_basicsize = sizeof(Tape),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = tape_new,
    .tp_dealloc = tape_dealloc,
    .tp_methods = tape_methods,
    .tp_getset = tape_getset,
    .tp_as_sequence = &tape_sequence,
    .tp_doc = "Tape(): the kernel calls made while it records, to be made again without Python.",
};

/* record(tape): this thread's later calls go onto `tape` too; record(None): onto none. */
static PyObject *record(PyObject *module, PyObject *arg) {
    if (arg != Py_None && !PyObject_TypeCheck(arg, &TapeType))
        return PyErr_Format(PyExc_TypeError, "record takes a Tape or None, not %s", Py_TYPE(arg)->tp_name);
    Tape *old = recording;
    recording = arg == Py_None ? NULL : (Tape *)arg;
    recording_thread = PyThread_get_thread_ident();
    Py_XINCREF(recording);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* Whether this thread's calls go onto a tape now: for vg_eager.c, which calls kernels itself only when
 * none does (a capsule "vg_call.recording" in the module's `recording_test`). */
static int is_recording(void) { return recording != NULL && PyThread_get_thread_ident() == recording_thread; }

static PyMethodDef methods[] = {
    {"record", record, METH_O, "record(tape): later calls also go onto the tape; record(None): stop"},
    {"function", function, METH_VARARGS, "function(address, signature, returns, fallback)"},
    {"arrays", arrays, METH_VARARGS, "arrays(ndarray, data_offset): pass arrays as their data pointers"},
    {"layout", layout, METH_O, "layout(tuple): bytes saying the layout of each array in the tuple"},
    {"layouts", layouts, METH_VARARGS, "layouts(nd, dims, strides, descr, flags, chars): offsets for layout"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "vg_call", NULL, -1, methods};

PyMODINIT_FUNC PyInit_vg_call(void) {
    if (PyType_Ready(&FunctionType) < 0 || PyType_Ready(&TapeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&TapeType);
    if (PyModule_AddObject(m, "Tape", (PyObject *)&TapeType) < 0) return Py_DECREF(&TapeType), Py_DECREF(m), NULL;
    PyObject *test = PyCapsule_New((void *)is_recording, "vg_call.recording", NULL);
    if (test == NULL || PyModule_AddObject(m, "recording_test", test) < 0) return Py_XDECREF(test), Py_DECREF(m), NULL;
    return m;
}
