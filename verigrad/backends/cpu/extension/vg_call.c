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

static PyObject *call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Function *f = (Function *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n != f->nargs)
        return PyObject_Vectorcall(f->fallback, args, nargsf, kwnames); /* ctypes says what is wrong */
    I ints[MAX_INTS] = {0};
    double doubles[MAX_DOUBLES] = {0};
    I lists[MAX_LISTS][MAX_POINTERS];
    int ni = 0, nd = 0, nl = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (f->signature[k] == 'd') {
            double v = PyFloat_AsDouble(args[k]);
            if (v == -1.0 && PyErr_Occurred()) return NULL;
            doubles[nd++] = v;
            continue;
        }
        if (f->signature[k] == 'p') {
            if (pointers(args[k], lists[nl])) return PyObject_Vectorcall(f->fallback, args, nargsf, NULL);
            ints[ni++] = (I)(intptr_t)lists[nl++];
            continue;
        }
        int found = integer(args[k], &ints[ni++]);
        if (found < 0) return NULL;
        if (found > 0) return PyObject_Vectorcall(f->fallback, args, nargsf, NULL);
    }
    I r = 0;
    void *fn = f->fn;
    Py_BEGIN_ALLOW_THREADS
#define INTS ints[0], ints[1], ints[2], ints[3], ints[4], ints[5], ints[6], ints[7], ints[8], ints[9], \
             ints[10], ints[11], ints[12], ints[13], ints[14], ints[15]
    switch (nd) {
    case 0: r = ((fn0)fn)(INTS); break;
    case 1: r = ((fn1)fn)(INTS, doubles[0]); break;
    case 2: r = ((fn2)fn)(INTS, doubles[0], doubles[1]); break;
    case 3: r = ((fn3)fn)(INTS, doubles[0], doubles[1], doubles[2]); break;
    default: r = ((fn4)fn)(INTS, doubles[0], doubles[1], doubles[2], doubles[3]); break;
    }
#undef INTS
    Py_END_ALLOW_THREADS
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

static PyMethodDef methods[] = {
    {"function", function, METH_VARARGS, "function(address, signature, returns, fallback)"},
    {"arrays", arrays, METH_VARARGS, "arrays(ndarray, data_offset): pass arrays as their data pointers"},
    {"layout", layout, METH_O, "layout(tuple): bytes saying the layout of each array in the tuple"},
    {"layouts", layouts, METH_VARARGS, "layouts(nd, dims, strides, descr, flags, chars): offsets for layout"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "vg_call", NULL, -1, methods};

PyMODINIT_FUNC PyInit_vg_call(void) {
    if (PyType_Ready(&FunctionType) < 0) return NULL;
    return PyModule_Create(&module);
}
