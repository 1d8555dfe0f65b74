/* vg_eager: the eager call of an op in C (docs/eager.md), where Python's would only repeat known steps.
 *
 * `Method(op, fallback, swap)` is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR, vectorcall): bound
 * on Tensor (`__add__`, `exp`, ...) it calls `op` on (self, *args) ((other, self) with `swap`); with op
 * None it is an `Op.__call__`, the op being the first argument. A call runs what `Op.__call__`
 * (ops/_op.py) and `EagerMode.run` (eager.py) run, in the same order and with the same objects: the plan
 * key (the operands' shapes and dtypes, the params keyed as `_exact_items` keys them where the op has
 * canonical params), the op's plan (made in Python, `Op._plan`, the first time), the backend's stamp,
 * the kernel on the operands' arrays, the result Tensor, the autograd Node where one is needed. A kernel
 * whose plan says `fast` (a C kernel of a known calling convention: element-wise unary, binary on
 * same-shape or scalar operands; softmax and log_softmax over the last axis) is called through its function
 * pointer on arrays allocated here, with
 * exactly the arguments its Python wrapper would pass. Anything else (another mode, a variadic op, an
 * operand that is not a tensor or a float or int beside float tensors, a plan to choose again, a
 * warning kernel, a composite op, a tape recording) goes to `fallback`, the Python code, unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

#define MAX_OPERANDS 8
#define FAST_UNARY 1
#define FAST_BINARY 2
#define FAST_RESHAPE 3 /* the reference's np.reshape(x, shape): x.reshape(shape) */
#define FAST_PERMUTE 4 /* the reference's np.transpose(x, axes): x.transpose(axes) */
#define FAST_SLICE 5   /* the reference's x[tuple(slice(*t) for t in index) or ...] */
#define FAST_CONCAT 6  /* the reference's np.concatenate(xs, axis), the xs of one dtype */
#define FAST_ROWS 7    /* rows.py's softmax and log_softmax over the last axis (see `rows_call`) */
#define FAST_REDUCE 8  /* reduce.py's sum, mean, max and min of a layout it has described (see `reduce_call`) */
#define FAST_MATMUL 9  /* matmul.py's matmul kernel, through a plan it has made (see `matmul_call`) */
#define FAST_BROADCAST 10 /* movement.py's broadcast_to: the reference's view, strides it has seen (`broadcast_view`) */

/* set by `setup` */
static PyTypeObject *tensor_type, *node_type, *dtype_type, *size_type;
static Py_ssize_t t_spec, t_payload, t_grad, t_node, t_hooks, t_rg;      /* Tensor's slots */
static Py_ssize_t t_view, t_views;                                       /* (unset on most tensors) */
static Py_ssize_t p_kernel, p_native, p_out, p_stamp, p_warns, p_fast;   /* Plan's */
static Py_ssize_t n_op, n_inputs, n_params, n_freed, n_stamp;            /* Node's */
static PyObject *eager_mode, *local, *run_function, *constant;
static PyObject *active, *active_default; /* backends.active's LOCAL (its `stack`: this thread's blocks) and _DEFAULT */
static PyObject *versions_module; /* verigrad.versions: a new Node's stamp is its `clock` */
static PyObject *error_state, *quiet_states; /* eager.py's _ERROR_STATE (or None) and _QUIET */
static int (*recording)(void) = NULL; /* vg_call's: whether this thread records a tape */
static PyObject *scalar_specs[2];      /* the spec of a 0-d f32 and f64 constant (made by `constant`) */
static PyObject *S_stack, *S_grad, *S_plans, *S_variadic, *S_positional, *S_canonical, *S_decompose,
    *S_group, *S_differentiable, *S_vjp, *S_reference, *S_shape, *S_dtype, *S_kind, *S_np, *S_threads, *S_first,
    *S_stamp, *S_plan, *S_run, *S_axes, *S_index, *S_axis, *S_clock, *S_keepdim, *S_size;
static int ready = 0;

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))
static char not_handled; /* a sentinel, never handed to Python */
#define NOT_HANDLED ((PyObject *)&not_handled)

/* the offset of slot `name` of `type` (a member descriptor in its dict) */
static int offset_of(PyTypeObject *type, const char *name, Py_ssize_t *out) {
    PyObject *d = PyDict_GetItemString(type->tp_dict, name);
    if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "vg_eager: %s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "vg_eager: %s.%s is not an object slot", type->tp_name, name);
        return -1;
    }
    *out = m->offset;
    return 0;
}

/* Attributes read on every call (an op's `_eager_plans`, `reference`, `group`, ...; a spec's shape and
 * dtype; a backend's stamp) through a small cache (CPython 3.11; elsewhere PyObject_GetAttr itself): an
 * entry holds what PyObject_GetAttr answered for (object, name), read from the object's instance dict,
 * or from its type where the dict has no such key and the type's value is not a descriptor, and is used
 * while that dict is the same one at the same version and the type at the same version tag. A dict's
 * version changes with every write to it and is never given to another dict (a new dict takes a new one),
 * and a type's tag changes with every assignment to it, so a hit is what PyObject_GetAttr would answer:
 * a replaced `op.reference` or `EagerMode.run` is seen at the next call. Objects whose type overrides
 * attribute access, has a data descriptor (a property, a slot) of that name, or has no instance dict are
 * read by PyObject_GetAttr every time. Read and written with the GIL held. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define ATTR_CACHE 256
static struct {
    PyObject *obj, *name, *dict; /* identities only: compared, never used */
    uint64_t dict_version;
    PyTypeObject *type;
    unsigned int type_version;
    PyObject *value; /* borrowed: the dict (or the type) holds it while both versions stay */
} attrs[ATTR_CACHE];

static PyObject *attr(PyObject *o, PyObject *name) {
    PyTypeObject *tp = Py_TYPE(o);
    if (tp->tp_getattro != PyObject_GenericGetAttr) return PyObject_GetAttr(o, name);
    PyObject **at = _PyObject_GetDictPtr(o);
    PyObject *dict = at == NULL ? NULL : *at;
    if (dict == NULL || !PyDict_CheckExact(dict)) return PyObject_GetAttr(o, name);
    uint64_t version = ((PyDictObject *)dict)->ma_version_tag;
    size_t h = (((uintptr_t)o >> 4) ^ ((uintptr_t)name >> 3) * 0x9E3779B1u) & (ATTR_CACHE - 1);
    if (attrs[h].obj == o && attrs[h].name == name && attrs[h].dict == dict && attrs[h].dict_version == version &&
        attrs[h].type == tp && attrs[h].type_version == tp->tp_version_tag &&
        (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return Py_NewRef(attrs[h].value);
    PyObject *in_type = _PyType_Lookup(tp, name); /* borrowed; gives the type a version tag */
    if (in_type != NULL && Py_TYPE(in_type)->tp_descr_set != NULL) return PyObject_GetAttr(o, name);
    PyObject *v = PyDict_GetItemWithError(dict, name);
    if (v == NULL && PyErr_Occurred()) return NULL;
    if (v == NULL && (in_type == NULL || Py_TYPE(in_type)->tp_descr_get != NULL)) return PyObject_GetAttr(o, name);
    if (v == NULL) v = in_type;
    if (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) {
        attrs[h].obj = o, attrs[h].name = name, attrs[h].dict = dict, attrs[h].dict_version = version;
        attrs[h].type = tp, attrs[h].type_version = tp->tp_version_tag, attrs[h].value = v;
    }
    return Py_NewRef(v);
}
#else
#define attr PyObject_GetAttr
#endif

/* a new reference to attribute `name`'s truth: 1, 0, or -1 with an exception */
static int truth(PyObject *o, PyObject *name) {
    PyObject *v = attr(o, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* the last item of list attribute `name` of modes.LOCAL (borrowed from the list, which the thread's
 * state holds), or NULL with an exception */
static PyObject *top_of(PyObject *name) {
    PyObject *list = PyObject_GetAttr(local, name);
    if (list == NULL) return NULL;
    PyObject *top = NULL;
    if (PyList_Check(list) && PyList_GET_SIZE(list) > 0) top = PyList_GET_ITEM(list, PyList_GET_SIZE(list) - 1);
    else PyErr_SetString(PyExc_RuntimeError, "vg_eager: an empty mode stack");
    Py_XINCREF(top);
    Py_DECREF(list);
    return top;
}

static PyObject *new_tensor(PyObject *spec, PyObject *payload) { /* steals payload */
    PyObject *t = tensor_type->tp_alloc(tensor_type, 0);
    if (t == NULL) return Py_DECREF(payload), NULL;
    Py_INCREF(spec);
    SLOT(t, t_spec) = spec;
    SLOT(t, t_payload) = payload;
    Py_INCREF(Py_None), SLOT(t, t_grad) = Py_None;
    Py_INCREF(Py_None), SLOT(t, t_node) = Py_None;
    Py_INCREF(Py_None), SLOT(t, t_hooks) = Py_None;
    Py_INCREF(Py_False), SLOT(t, t_rg) = Py_False;
    return t;
}

/* a Python float or int beside float tensors of `typenum` (DType `dtype`), as `_scalar` and `lift` make
 * it: a 0-d constant of that dtype (one rounding of the double, or the int64 converted); NOT_HANDLED for
 * an int past int64 */
static PyObject *scalar(PyObject *v, int typenum, PyObject *dtype) {
    double d = 0;
    long long i = 0;
    int is_float = PyFloat_CheckExact(v);
    if (is_float) {
        d = PyFloat_AS_DOUBLE(v);
    } else {
        int overflow;
        i = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (overflow) return NOT_HANDLED;
    }
    PyObject *a = PyArray_SimpleNew(0, NULL, typenum);
    if (a == NULL) return NULL;
    void *data = PyArray_DATA((PyArrayObject *)a);
    if (typenum == NPY_FLOAT32) *(float *)data = is_float ? (float)d : (float)i;
    else *(double *)data = is_float ? d : (double)i;
    PyObject **spec = &scalar_specs[typenum == NPY_FLOAT32 ? 0 : 1];
    if (*spec == NULL) { /* the first: `constant` makes the tensor, and its spec is kept */
        PyObject *t = PyObject_CallFunctionObjArgs(constant, a, dtype, NULL);
        Py_DECREF(a);
        if (t != NULL && PyObject_TypeCheck(t, tensor_type)) {
            *spec = SLOT(t, t_spec);
            Py_INCREF(*spec);
        }
        return t;
    }
    return new_tensor(*spec, a);
}

static PyObject *dtype_f32, *dtype_f64, *conform_fn;

/* the NumPy type number of DType `d` where it is f32 or f64, else -1 */
static int float_typenum(PyObject *d) { return d == dtype_f32 ? NPY_FLOAT32 : d == dtype_f64 ? NPY_FLOAT64 : -1; }

typedef void (*unary_fn)(const void *, void *, int64_t, int64_t, int);
typedef void (*binary_fn)(const void *, const void *, void *, int64_t, int64_t, int);
typedef void (*broadcast_fn)(const void *, const void *, void *, const int64_t *, int64_t, int);

static int same_dims(PyArrayObject *a, PyArrayObject *b) {
    int nd = PyArray_NDIM(a);
    if (nd != PyArray_NDIM(b)) return 0;
    for (int d = 0; d < nd; d++)
        if (PyArray_DIMS(a)[d] != PyArray_DIMS(b)[d]) return 0;
    return 1;
}

/* The kernel of `fast` = (kind, fn, fn_bc, typenum, backend, chunk) called as its Python wrapper
 * (elementwise.py's _unary and _binary) calls it, on arrays it takes there: a new array, NOT_HANDLED
 * (no exception) for arrays the wrapper would not give to that function, or NULL with an exception. */
/* the int64s of tuple `t` (at most NPY_MAXDIMS) into `out`: their count, or -1 (no exception) for
 * another value */
static int int_items(PyObject *t, npy_intp *out) {
    if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) > NPY_MAXDIMS) return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(t); k++) {
        PyObject *v = PyTuple_GET_ITEM(t, k);
        if (!PyLong_CheckExact(v)) return -1;
        out[k] = PyLong_AsSsize_t(v);
        if (out[k] == -1 && PyErr_Occurred()) return PyErr_Clear(), -1;
    }
    return (int)PyTuple_GET_SIZE(t);
}

/* x[slices] for the slice op's index ((start, stop, step) ints per axis), as its reference indexes */
static PyObject *sliced(PyObject *x, PyObject *index) {
    if (!PyTuple_CheckExact(index)) return NOT_HANDLED;
    Py_ssize_t n = PyTuple_GET_SIZE(index);
    PyObject *key = PyTuple_New(n);
    if (key == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t = PyTuple_GET_ITEM(index, k);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3 || !PyLong_CheckExact(PyTuple_GET_ITEM(t, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(t, 1)) || !PyLong_CheckExact(PyTuple_GET_ITEM(t, 2)))
            return Py_DECREF(key), NOT_HANDLED;
        PyObject *s = PySlice_New(PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2));
        if (s == NULL) return Py_DECREF(key), NULL;
        PyTuple_SET_ITEM(key, k, s);
    }
    PyObject *r = PyObject_GetItem(x, n ? key : Py_Ellipsis); /* x[()] of a 0-d array is a scalar, x[...] a view */
    Py_DECREF(key);
    return r;
}

/* A view kernel (`fast` = (kind,)) as the NumPy method its reference calls: x.reshape(shape),
 * x.transpose(axes) (the one param a tuple of ints) or x[slices]; NOT_HANDLED (no exception) otherwise. */
static PyObject *view(int kind, PyObject *x, PyObject *params) {
    if (!PyArray_CheckExact(x) || PyDict_GET_SIZE(params) != 1) return NOT_HANDLED; /* (a subclass's own) */
    PyObject *name = kind == FAST_RESHAPE ? S_shape : kind == FAST_PERMUTE ? S_axes : S_index;
    PyObject *value = PyDict_GetItemWithError(params, name);
    if (value == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    if (kind == FAST_SLICE) return sliced(x, value);
    npy_intp items[NPY_MAXDIMS];
    int n = int_items(value, items);
    if (n < 0) return NOT_HANDLED;
    PyArray_Dims dims = {items, n};
    if (kind == FAST_RESHAPE) return PyArray_Newshape((PyArrayObject *)x, &dims, NPY_CORDER);
    return PyArray_Transpose((PyArrayObject *)x, &dims);
}

/* np.concatenate(arrays, axis) where the arrays are C-contiguous, of one plain dtype (no object references)
 * and one rank, and agree off `axis`: NumPy's result then is a new C-contiguous array (its layout follows
 * the inputs' strides, which are C order on every axis longer than 1), whose rows are the inputs' blocks
 * copied in order; made so here, without NumPy's general loop. NOT_HANDLED (no exception) otherwise. */
static PyObject *copied_together(PyObject **arrays, Py_ssize_t n, long axis) {
    PyArrayObject *first = (PyArrayObject *)arrays[0];
    int nd = PyArray_NDIM(first);
    if (nd == 0 || axis < -nd || axis >= nd || PyDataType_FLAGCHK(PyArray_DESCR(first), NPY_ITEM_REFCOUNT))
        return NOT_HANDLED;
    if (axis < 0) axis += nd;
    npy_intp dims[NPY_MAXDIMS];
    memcpy(dims, PyArray_DIMS(first), nd * sizeof(npy_intp));
    dims[axis] = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyArrayObject *a = (PyArrayObject *)arrays[k];
        if (PyArray_NDIM(a) != nd || !PyArray_IS_C_CONTIGUOUS(a)) return NOT_HANDLED;
        for (int d = 0; d < nd; d++)
            if (d != axis && PyArray_DIMS(a)[d] != dims[d]) return NOT_HANDLED;
        dims[axis] += PyArray_DIMS(a)[axis];
    }
    PyArray_Descr *descr = PyArray_DESCR(first);
    Py_INCREF(descr);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    npy_intp outer = 1, inner = PyArray_ITEMSIZE(first); /* rows before `axis`; bytes of one step along it */
    for (int d = 0; d < axis; d++) outer *= dims[d];
    for (int d = axis + 1; d < nd; d++) inner *= dims[d];
    char *to = PyArray_BYTES((PyArrayObject *)out);
    for (npy_intp i = 0; i < outer; i++)
        for (Py_ssize_t k = 0; k < n; k++) {
            npy_intp block = PyArray_DIMS((PyArrayObject *)arrays[k])[axis] * inner;
            if (block > 0) memcpy(to, PyArray_BYTES((PyArrayObject *)arrays[k]) + i * block, block);
            to += block;
        }
    return out;
}

/* np.concatenate(arrays, axis) of exact ndarrays of one dtype (the concat reference converts none of
 * them then), the one param `axis` an int; NOT_HANDLED (no exception) otherwise */
static PyObject *concatenated(PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (n < 1 || PyDict_GET_SIZE(params) != 1) return NOT_HANDLED;
    PyObject *axis = PyDict_GetItemWithError(params, S_axis);
    if (axis == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    if (!PyLong_CheckExact(axis)) return NOT_HANDLED;
    int overflow;
    long a = PyLong_AsLongAndOverflow(axis, &overflow);
    if (overflow || a < -NPY_MAXDIMS || a >= NPY_MAXDIMS) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    for (Py_ssize_t k = 0; k < n; k++)
        if (!PyArray_CheckExact(arrays[k]) ||
            PyArray_DESCR((PyArrayObject *)arrays[k]) != PyArray_DESCR((PyArrayObject *)arrays[0]))
            return NOT_HANDLED;
    PyObject *r = copied_together(arrays, n, a);
    if (r != NOT_HANDLED) return r;
    PyObject *list = PyList_New(n);
    if (list == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) PyList_SET_ITEM(list, k, Py_NewRef(arrays[k]));
    r = PyArray_Concatenate(list, (int)a);
    Py_DECREF(list);
    return r;
}

typedef void (*rows_fn)(const void *, void *, int64_t, int64_t, int64_t, int, int64_t, int);

/* an int object's value into `out`: 0, or -1 with an exception; steals v */
static int int_value(PyObject *v, long long *out) {
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The settings a direct call reads (set by `readers`), read as their Python functions read them but
 * without their frames: a threads.CountSetting's `get` (its `explicit`, else the environment variable's
 * value it saw last while the variable's text is that same object, else `get()` itself), the thread
 * count through KernelTable.threads (that property: THREAD_COUNT.get()), and _ffi.bufsize (the value it
 * saw last while NumPy's error state is that same object, else `bufsize()` itself). */
typedef struct {
    PyObject *setting, *get, *environ, *key; /* environ NULL: `get()` every time */
} count_reader;
static count_reader thread_count, chunk_count;
static PyObject *threads_property, *bufsize_fn, *bufsize_seen, *numpy_state;
static PyObject *S_explicit, *S_seen;

static int count_value(count_reader *c, long long *out) {
    PyObject *v = attr(c->setting, S_explicit);
    if (v == NULL || v != Py_None) return int_value(v, out);
    Py_DECREF(v);
    v = NULL;
    if (c->environ != NULL) {
        PyObject *text = PyDict_GetItemWithError(c->environ, c->key);
        if (text == NULL && PyErr_Occurred()) return -1;
        PyObject *seen = attr(c->setting, S_seen);
        if (seen == NULL) return -1;
        if (PyTuple_CheckExact(seen) && PyTuple_GET_SIZE(seen) == 2 &&
            PyTuple_GET_ITEM(seen, 0) == (text == NULL ? Py_None : text))
            v = Py_NewRef(PyTuple_GET_ITEM(seen, 1));
        Py_DECREF(seen);
    }
    return int_value(v != NULL ? v : PyObject_CallNoArgs(c->get), out);
}

/* the int a callable `f` returns (Python's min_chunk(), a block size): 0, or -1 with an exception */
static int called_int(PyObject *f, long long *out) {
    if (f == chunk_count.get && f != NULL) return count_value(&chunk_count, out);
    if (f == bufsize_fn && f != NULL) {
        PyObject *state, *seen = PyList_GET_ITEM(bufsize_seen, 0);
        if (PyContextVar_Get(numpy_state, NULL, &state) < 0) return -1;
        Py_XDECREF(state); /* only its identity: the variable holds it */
        if (state != NULL && PyTuple_CheckExact(seen) && PyTuple_GET_SIZE(seen) == 2 &&
            PyTuple_GET_ITEM(seen, 0) == state)
            return int_value(Py_NewRef(PyTuple_GET_ITEM(seen, 1)), out);
    }
    return int_value(PyObject_CallNoArgs(f), out);
}

/* backend.threads, as an int: 0, or -1 with an exception */
static int threads_of(PyObject *backend, int *out) {
    long long v;
    int rc = threads_property != NULL && _PyType_Lookup(Py_TYPE(backend), S_threads) == threads_property
                 ? count_value(&thread_count, &v)
                 : int_value(PyObject_GetAttr(backend, S_threads), &v);
    if (rc == 0 && (v < INT_MIN || v > INT_MAX)) {
        PyErr_SetString(PyExc_OverflowError, "vg_eager: a thread count past a C int");
        rc = -1;
    }
    *out = (int)v;
    return rc;
}

/* A row kernel (`fast` = (FAST_ROWS, fn, log, typenum, backend, min_chunk, block)) as rows.py's `_softmax`
 * wrapper calls its C function: one C-contiguous aligned non-empty array of the dtype, the one param
 * `axis` its last axis; fn(x, out, rows, n, block(), log, max(1, min_chunk() // n), backend.threads) into a
 * new array. NOT_HANDLED (no exception) for anything else: the wrapper copies a view or runs the
 * reference. */
static PyObject *rows_call(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (n != 1 || PyDict_GET_SIZE(params) != 1) return NOT_HANDLED;
    PyObject *axis = PyDict_GetItemWithError(params, S_axis);
    if (axis == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    int typenum = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 3));
    int log = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 2));
    if (PyErr_Occurred()) return NULL;
    PyArray_Descr *want = PyArray_DescrFromType(typenum);
    if (want == NULL) return NULL;
    Py_DECREF(want); /* a builtin descriptor: NumPy holds it */
    PyArrayObject *a = (PyArrayObject *)arrays[0];
    if (!PyLong_CheckExact(axis) || !PyArray_CheckExact(a) || PyArray_DESCR(a) != want || PyArray_NDIM(a) < 1 ||
        PyArray_SIZE(a) == 0 || !PyArray_CHKFLAGS(a, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED))
        return NOT_HANDLED;
    int overflow;
    long ax = PyLong_AsLongAndOverflow(axis, &overflow);
    if (ax == -1 && PyErr_Occurred()) return NULL;
    int nd = PyArray_NDIM(a);
    if (overflow || ax != nd - 1) return NOT_HANDLED;
    if (recording != NULL && recording()) return NOT_HANDLED; /* a tape takes vg_call's calls only */
    void *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 1));
    if (fn == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    long long chunk, block;
    int threads;
    if (called_int(PyTuple_GET_ITEM(fast, 6), &block) < 0 || called_int(PyTuple_GET_ITEM(fast, 5), &chunk) < 0 ||
        threads_of(PyTuple_GET_ITEM(fast, 4), &threads) < 0)
        return NULL;
    int64_t cols = PyArray_DIMS(a)[nd - 1], rows = PyArray_SIZE(a) / cols;
    int64_t min_rows = chunk / cols; /* Python's floor division, for chunk >= 0; 1 at least either way */
    if (min_rows < 1) min_rows = 1;
    PyObject *out = PyArray_SimpleNew(nd, PyArray_DIMS(a), typenum);
    if (out == NULL) return NULL;
    void *y = PyArray_DATA((PyArrayObject *)out);
    Py_BEGIN_ALLOW_THREADS
    ((rows_fn)fn)(PyArray_DATA(a), y, rows, cols, block, log, min_rows, threads);
    Py_END_ALLOW_THREADS
    return out;
}

typedef int (*reduce_fn)(const void *, void *, const void *, int64_t, int);

/* A reduction (`fast` = (FAST_REDUCE, fn, calls, typenum, backend, min_chunk, block, sum_kind, described))
 * as reduce.py's `_reduce` wrapper calls its C function, where that wrapper has described the layout
 * already: one C-contiguous aligned non-empty array of the dtype, the params `axis` (a tuple) and
 * `keepdim`; its description and result shape found in `calls` under (x.shape, axis, keepdim, block());
 * fn(x, out, description, min_chunk(), backend.threads) into a new array. A sum or mean (sum_kind 0 or
 * 1) also of a 0-d array (`zero_d_sum`), and of an F-contiguous array over every axis, which NumPy sums
 * in memory order: as the C-contiguous reversed view, whose layout `described` describes where `calls`
 * has none. NOT_HANDLED (no exception) for anything else, a layout not described yet or the kernel's
 * refusal (a signed zero it cannot tell): the wrapper. */
/* The last REDUCE_SEEN descriptions reduce_call found, each under what its key was made of (the `calls`
 * dict, the axis and keepdim objects, the block, the shape), so that a call with those again (the same
 * plan's params: the same objects) skips making x.shape and the key; a description is a function of its
 * key, so an entry stays right after `calls` forgets it. */
#define REDUCE_SEEN 8
static struct {
    PyObject *calls, *axis, *keepdim, *found; /* held: their identity is compared */
    long long block;
    int nd;
    npy_intp dims[NPY_MAXDIMS];
} reduce_seen[REDUCE_SEEN];
static int reduce_next;

static PyObject *reduce_lookup(PyObject *calls, PyObject *axis, PyObject *keepdim, long long block, PyArrayObject *a) {
    int nd = PyArray_NDIM(a);
    for (int k = 0; k < REDUCE_SEEN; k++)
        if (reduce_seen[k].found != NULL && reduce_seen[k].calls == calls && reduce_seen[k].axis == axis &&
            reduce_seen[k].keepdim == keepdim && reduce_seen[k].block == block && reduce_seen[k].nd == nd &&
            memcmp(reduce_seen[k].dims, PyArray_DIMS(a), nd * sizeof(npy_intp)) == 0)
            return reduce_seen[k].found;
    return NULL;
}

static void reduce_keep(PyObject *calls, PyObject *axis, PyObject *keepdim, long long block, PyArrayObject *a,
                        PyObject *found) {
    int k = reduce_next;
    reduce_next = (reduce_next + 1) % REDUCE_SEEN;
    PyObject *old[4] = {reduce_seen[k].calls, reduce_seen[k].axis, reduce_seen[k].keepdim, reduce_seen[k].found};
    reduce_seen[k].calls = Py_NewRef(calls), reduce_seen[k].axis = Py_NewRef(axis);
    reduce_seen[k].keepdim = Py_NewRef(keepdim), reduce_seen[k].found = Py_NewRef(found);
    reduce_seen[k].block = block, reduce_seen[k].nd = PyArray_NDIM(a);
    memcpy(reduce_seen[k].dims, PyArray_DIMS(a), PyArray_NDIM(a) * sizeof(npy_intp));
    for (int j = 0; j < 4; j++) Py_XDECREF(old[j]); /* last: a decref may run Python code */
}

/* A sum or mean of a 0-d array over no axes as its reference computes it: np.sum(x, dtype=f64), the
 * reduction's identity 0.0 plus x widened (-0.0 gives +0.0, a signaling NaN a quiet one), for a mean
 * divided by the count 1 (which changes nothing then), narrowed to x's dtype: a new 0-d array */
static PyObject *zero_d_sum(PyArrayObject *a, int typenum) {
    PyObject *out = PyArray_SimpleNew(0, NULL, typenum);
    if (out == NULL) return NULL;
    volatile double zero = 0.0; /* (not folded away, whatever the build's flags) */
    void *y = PyArray_DATA((PyArrayObject *)out);
    if (typenum == NPY_FLOAT32) *(float *)y = (float)(zero + (double)*(const float *)PyArray_DATA(a));
    else *(double *)y = zero + *(const double *)PyArray_DATA(a);
    return out;
}

/* whether `axis` is (0, 1, ..., nd - 1): every axis, as a full reduction's canonical params give them */
static int all_axes(PyObject *axis, int nd) {
    if (PyTuple_GET_SIZE(axis) != nd) return 0;
    for (int k = 0; k < nd; k++) {
        PyObject *item = PyTuple_GET_ITEM(axis, k);
        if (!PyLong_CheckExact(item) || PyLong_AsLong(item) != k) return PyErr_Clear(), 0;
    }
    return 1;
}

static PyObject *reduce_call(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (n != 1 || PyDict_GET_SIZE(params) != 2) return NOT_HANDLED;
    PyObject *axis = PyDict_GetItemWithError(params, S_axis);
    if (axis == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    PyObject *keepdim = PyDict_GetItemWithError(params, S_keepdim);
    if (keepdim == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    int typenum = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 3));
    if (PyErr_Occurred()) return NULL;
    PyArray_Descr *want = PyArray_DescrFromType(typenum);
    if (want == NULL) return NULL;
    Py_DECREF(want); /* a builtin descriptor: NumPy holds it */
    PyArrayObject *a = (PyArrayObject *)arrays[0];
    PyObject *calls = PyTuple_GET_ITEM(fast, 2);
    /* sums (0) and means (1) also take a 0-d array, and an F-contiguous one reduced over every axis (its
     * reference sums it in memory order: as the C-contiguous reversed view, which is reduced instead) */
    long sum_kind = -1;
    if (PyTuple_GET_SIZE(fast) > 8 && PyLong_CheckExact(PyTuple_GET_ITEM(fast, 7))) {
        sum_kind = PyLong_AsLong(PyTuple_GET_ITEM(fast, 7));
        if (sum_kind == -1 && PyErr_Occurred()) return NULL;
    }
    if (!PyTuple_CheckExact(axis) || !PyBool_Check(keepdim) || !PyDict_CheckExact(calls) || !PyArray_CheckExact(a) ||
        PyArray_DESCR(a) != want || PyArray_SIZE(a) == 0 || !PyArray_ISALIGNED(a))
        return NOT_HANDLED;
    if (!PyArray_IS_C_CONTIGUOUS(a)) {
        if (sum_kind < 0 || PyArray_NDIM(a) < 2 || !PyArray_IS_F_CONTIGUOUS(a) || !all_axes(axis, PyArray_NDIM(a)))
            return NOT_HANDLED;
        if (recording != NULL && recording()) return NOT_HANDLED;
        PyObject *reversed = PyArray_Transpose(a, NULL); /* the C-contiguous view reduced in a's place */
        if (reversed == NULL) return NULL;
        PyObject *r = reduce_call(fast, &reversed, 1, params);
        Py_DECREF(reversed);
        return r;
    }
    if (recording != NULL && recording()) return NOT_HANDLED; /* a tape takes vg_call's calls only */
    if (PyArray_NDIM(a) == 0 && sum_kind >= 0 && PyTuple_GET_SIZE(axis) == 0)
        return zero_d_sum(a, typenum);
    long long chunk, block;
    if (called_int(PyTuple_GET_ITEM(fast, 6), &block) < 0) return NULL;
    PyObject *found = reduce_lookup(calls, axis, keepdim, block, a);
    if (found == NULL) {
        PyObject *shape = PyObject_GetAttr((PyObject *)a, S_shape);
        if (shape == NULL) return NULL;
        PyObject *b = PyLong_FromLongLong(block);
        PyObject *key = b == NULL ? NULL : PyTuple_Pack(4, shape, axis, keepdim, b);
        Py_DECREF(shape);
        Py_XDECREF(b);
        if (key == NULL) return NULL;
        found = PyDict_GetItemWithError(calls, key);
        Py_XINCREF(found);
        if (found == NULL && !PyErr_Occurred() && sum_kind >= 0) /* a layout met first here (a reversed view) */
            found = PyObject_Call(PyTuple_GET_ITEM(fast, 8), key, NULL); /* described as the kernel does */
        Py_DECREF(key);
        if (found == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED; /* described there first */
        if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 2) /* None: not the kernel's */
            return Py_DECREF(found), NOT_HANDLED;
        reduce_keep(calls, axis, keepdim, block, a, found);
        Py_DECREF(found);
    }
    Py_INCREF(found); /* the cache may be emptied by another thread while the kernel runs */
    npy_intp dims[NPY_MAXDIMS];
    int nd = int_items(PyTuple_GET_ITEM(found, 1), dims);
    void *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 1));
    PyObject *r = NOT_HANDLED, *out = NULL;
    Py_buffer desc = {0};
    if (nd < 0 || fn == NULL) goto end;
    int threads;
    if (called_int(PyTuple_GET_ITEM(fast, 5), &chunk) < 0 || threads_of(PyTuple_GET_ITEM(fast, 4), &threads) < 0)
        goto failed;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(found, 0), &desc, PyBUF_SIMPLE) < 0) goto failed;
    out = PyArray_SimpleNew(nd, dims, typenum);
    if (out == NULL) goto failed;
    int refused;
    Py_BEGIN_ALLOW_THREADS
    refused = ((reduce_fn)fn)(PyArray_DATA(a), PyArray_DATA((PyArrayObject *)out), desc.buf, chunk, threads);
    Py_END_ALLOW_THREADS
    if (refused) Py_CLEAR(out); /* the wrapper runs the reference */
    else r = out;
    goto end;
failed:
    r = NULL;
end:
    if (desc.obj != NULL) PyBuffer_Release(&desc);
    Py_DECREF(found);
    if (r == NOT_HANDLED && PyErr_Occurred()) r = NULL;
    return r;
}

/* The matmul kernel (`fast` = (FAST_MATMUL, vg_gemm, plans, typenum, backend, exact_default, its state)) as
 * matmul.py's `_matmul_kernel` runs it, where the plan it finds in `plans` under (a.shape, a.strides,
 * b.shape, b.strides, dtype, dtype, exact_default()) has a `direct` = (address of its vg_gemm arguments,
 * c's shape): vg_gemm(args, a, b, c, backend.threads) on a new C-contiguous c of that shape, the call the
 * plan makes. NOT_HANDLED (no exception) for anything else (operands of another type, dtype or alignment,
 * no plan yet, a plan that copies an operand first, vg_gemm asking for another layout: nothing done). */
#define MATMUL_SEEN 8
static struct {
    PyObject *plans, *flag, *plan; /* held: their identity is compared */
    int typenum; /* the plans of every dtype share `plans`: an empty or broadcast (zero-stride) operand's
                  * shape and strides are the same in f32 and f64 */
    int nd[2];
    npy_intp dims[2][NPY_MAXDIMS], strides[2][NPY_MAXDIMS];
} matmul_seen[MATMUL_SEEN];
static int matmul_next;
static PyObject *S_direct, *S_strides, *S_fast;

static int matmul_same(int k, PyObject *plans, PyObject *flag, PyArrayObject **ab) {
    if (matmul_seen[k].plan == NULL || matmul_seen[k].plans != plans || matmul_seen[k].flag != flag ||
        matmul_seen[k].typenum != PyArray_TYPE(ab[0]))
        return 0;
    for (int j = 0; j < 2; j++) {
        int nd = PyArray_NDIM(ab[j]);
        if (matmul_seen[k].nd[j] != nd || memcmp(matmul_seen[k].dims[j], PyArray_DIMS(ab[j]), nd * sizeof(npy_intp)) ||
            memcmp(matmul_seen[k].strides[j], PyArray_STRIDES(ab[j]), nd * sizeof(npy_intp)))
            return 0;
    }
    return 1;
}

/* the plan under the kernel's key (borrowed from the table above, or from `plans`), NULL where none */
static PyObject *matmul_plan(PyObject *plans, PyObject *flag, PyArrayObject **ab) {
    for (int k = 0; k < MATMUL_SEEN; k++)
        if (matmul_same(k, plans, flag, ab)) return matmul_seen[k].plan;
    PyObject *parts[4] = {NULL, NULL, NULL, NULL}, *key = NULL, *found = NULL;
    for (int j = 0; j < 2; j++) {
        parts[2 * j] = PyObject_GetAttr((PyObject *)ab[j], S_shape);
        parts[2 * j + 1] = PyObject_GetAttr((PyObject *)ab[j], S_strides);
        if (parts[2 * j] == NULL || parts[2 * j + 1] == NULL) goto end;
    }
    PyObject *dtype = (PyObject *)PyArray_DESCR(ab[0]);
    key = PyTuple_Pack(7, parts[0], parts[1], parts[2], parts[3], dtype, dtype, flag);
    if (key == NULL) goto end;
    found = PyDict_GetItemWithError(plans, key);
    if (found == NULL) goto end;
    int k = matmul_next;
    matmul_next = (matmul_next + 1) % MATMUL_SEEN;
    PyObject *old[3] = {matmul_seen[k].plans, matmul_seen[k].flag, matmul_seen[k].plan};
    matmul_seen[k].plans = Py_NewRef(plans), matmul_seen[k].flag = Py_NewRef(flag);
    matmul_seen[k].plan = Py_NewRef(found);
    matmul_seen[k].typenum = PyArray_TYPE(ab[0]);
    for (int j = 0; j < 2; j++) {
        int nd = PyArray_NDIM(ab[j]);
        matmul_seen[k].nd[j] = nd;
        memcpy(matmul_seen[k].dims[j], PyArray_DIMS(ab[j]), nd * sizeof(npy_intp));
        memcpy(matmul_seen[k].strides[j], PyArray_STRIDES(ab[j]), nd * sizeof(npy_intp));
    }
    for (int j = 0; j < 3; j++) Py_XDECREF(old[j]); /* last: a decref may run Python code */
    found = matmul_seen[k].plan;
end:
    for (int j = 0; j < 4; j++) Py_XDECREF(parts[j]);
    Py_XDECREF(key);
    return found;
}

typedef int (*gemm_fn)(const void *, const void *, const void *, void *, int);

/* a new reference to exact_default()'s value, read as it reads it where `state` = (_setting, _state):
 * _setting[0] where true, else not _state["fast"] once that is known; else exact_default() itself */
static PyObject *exact_flag(PyObject *exact_default, PyObject *state) {
    if (PyTuple_CheckExact(state) && PyTuple_GET_SIZE(state) == 2 && PyList_CheckExact(PyTuple_GET_ITEM(state, 0)) &&
        PyList_GET_SIZE(PyTuple_GET_ITEM(state, 0)) == 1 && PyDict_CheckExact(PyTuple_GET_ITEM(state, 1))) {
        PyObject *setting = PyList_GET_ITEM(PyTuple_GET_ITEM(state, 0), 0);
        if (PyBool_Check(setting) && setting == Py_True) return Py_NewRef(setting);
        PyObject *known = PyDict_GetItemWithError(PyTuple_GET_ITEM(state, 1), S_fast);
        if (known == NULL && PyErr_Occurred()) return NULL;
        if (PyBool_Check(setting) && known != NULL && PyBool_Check(known)) return Py_NewRef(known == Py_True ? Py_False : Py_True);
    }
    return PyObject_CallNoArgs(exact_default);
}

static PyObject *matmul_call(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (n != 2 || PyDict_GET_SIZE(params) != 0) return NOT_HANDLED;
    int typenum = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 3));
    if (PyErr_Occurred()) return NULL;
    PyArray_Descr *want = PyArray_DescrFromType(typenum);
    if (want == NULL) return NULL;
    Py_DECREF(want); /* a builtin descriptor: NumPy holds it */
    PyArrayObject *ab[2] = {(PyArrayObject *)arrays[0], (PyArrayObject *)arrays[1]};
    PyObject *plans = PyTuple_GET_ITEM(fast, 2);
    for (int j = 0; j < 2; j++)
        if (!PyArray_CheckExact(ab[j]) || PyArray_DESCR(ab[j]) != want || PyArray_NDIM(ab[j]) == 0 ||
            !PyArray_ISALIGNED(ab[j]))
            return NOT_HANDLED;
    if (!PyDict_CheckExact(plans)) return NOT_HANDLED;
    if (recording != NULL && recording()) return NOT_HANDLED; /* a tape takes vg_call's calls only */
    PyObject *flag = exact_flag(PyTuple_GET_ITEM(fast, 5), PyTuple_GET_ITEM(fast, 6));
    if (flag == NULL) return NULL;
    PyObject *r = NOT_HANDLED, *plan = matmul_plan(plans, flag, ab), *how = NULL, *out = NULL;
    if (plan == NULL) goto end;
    Py_INCREF(plan); /* the table may let it go while the kernel runs */
    how = attr(plan, S_direct);
    Py_DECREF(plan); /* `how` holds what the call needs */
    if (how == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear(); /* a plan of another kind */
        goto end;
    }
    npy_intp dims[NPY_MAXDIMS];
    int nd = PyTuple_CheckExact(how) && PyTuple_GET_SIZE(how) == 2 ? int_items(PyTuple_GET_ITEM(how, 1), dims) : -1;
    if (nd < 0) goto end;
    void *args = PyLong_AsVoidPtr(PyTuple_GET_ITEM(how, 0)), *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 1));
    if (args == NULL || fn == NULL) goto end;
    int threads, done;
    if (threads_of(PyTuple_GET_ITEM(fast, 4), &threads) < 0) goto failed;
    out = PyArray_SimpleNew(nd, dims, typenum);
    if (out == NULL) goto failed;
    Py_BEGIN_ALLOW_THREADS
    done = ((gemm_fn)fn)(args, PyArray_DATA(ab[0]), PyArray_DATA(ab[1]), PyArray_DATA((PyArrayObject *)out), threads);
    Py_END_ALLOW_THREADS
    if (done == 1) r = out, out = NULL; /* else nothing was done: the kernel's */
    goto end;
failed:
    r = NULL;
end:
    Py_XDECREF(out);
    Py_XDECREF(how);
    Py_DECREF(flag);
    if (r == NOT_HANDLED && PyErr_Occurred()) r = NULL;
    return r;
}

/* The layout of a binary kernel's operands broadcast otherwise than the cases `direct` makes itself:
 * elementwise.py's broadcast_dims(a, b) (the output shape and fn_bc's `dims`: the Python kernel's call),
 * the last BC_SEEN remembered by the operands' shapes and strides. 1 with `shape` (its rank in *nd) and
 * `dims` set; 0 where broadcast_dims says None (the wrapper's: no exception), -1 with an exception. */
#define BC_SEEN 8
static struct {
    PyObject *fn; /* held: its identity is compared */
    int nd[2], out_nd;
    npy_intp dims[2][NPY_MAXDIMS], strides[2][NPY_MAXDIMS], shape[NPY_MAXDIMS];
    int64_t bc[12];
} bc_seen[BC_SEEN];
static int bc_next;

static int bc_layout(PyObject *fn, PyArrayObject *a, PyArrayObject *b, npy_intp *shape, int *nd, int64_t *dims) {
    PyArrayObject *ab[2] = {a, b};
    for (int k = 0; k < BC_SEEN; k++) {
        int same = bc_seen[k].fn == fn && bc_seen[k].fn != NULL;
        for (int j = 0; same && j < 2; j++) {
            int d = PyArray_NDIM(ab[j]);
            same = bc_seen[k].nd[j] == d && !memcmp(bc_seen[k].dims[j], PyArray_DIMS(ab[j]), d * sizeof(npy_intp)) &&
                   !memcmp(bc_seen[k].strides[j], PyArray_STRIDES(ab[j]), d * sizeof(npy_intp));
        }
        if (same) {
            *nd = bc_seen[k].out_nd;
            memcpy(shape, bc_seen[k].shape, *nd * sizeof(npy_intp));
            memcpy(dims, bc_seen[k].bc, sizeof(bc_seen[k].bc));
            return 1;
        }
    }
    PyObject *found = PyObject_CallFunctionObjArgs(fn, (PyObject *)a, (PyObject *)b, NULL);
    if (found == NULL) return -1;
    int rc = 0;
    Py_buffer view = {0};
    if (PyTuple_CheckExact(found) && PyTuple_GET_SIZE(found) == 2) {
        *nd = int_items(PyTuple_GET_ITEM(found, 0), shape);
        if (*nd >= 0 && PyObject_GetBuffer(PyTuple_GET_ITEM(found, 1), &view, PyBUF_SIMPLE) == 0) {
            if (view.len == (Py_ssize_t)(12 * sizeof(int64_t))) {
                memcpy(dims, view.buf, 12 * sizeof(int64_t));
                rc = 1;
            }
            PyBuffer_Release(&view);
        }
        if (PyErr_Occurred()) rc = -1;
    }
    Py_DECREF(found);
    if (rc != 1) return rc;
    int k = bc_next;
    bc_next = (bc_next + 1) % BC_SEEN;
    Py_XSETREF(bc_seen[k].fn, Py_NewRef(fn));
    for (int j = 0; j < 2; j++) {
        int d = PyArray_NDIM(ab[j]);
        bc_seen[k].nd[j] = d;
        memcpy(bc_seen[k].dims[j], PyArray_DIMS(ab[j]), d * sizeof(npy_intp));
        memcpy(bc_seen[k].strides[j], PyArray_STRIDES(ab[j]), d * sizeof(npy_intp));
    }
    bc_seen[k].out_nd = *nd;
    memcpy(bc_seen[k].shape, shape, *nd * sizeof(npy_intp));
    memcpy(bc_seen[k].bc, dims, sizeof(bc_seen[k].bc));
    return 1;
}

/* broadcast_to's kernel (`fast` = (FAST_BROADCAST, strides)) where `strides` (a dict) holds the strides of
 * the reference's view for (x.shape, x.strides, shape): a read-only view of x's memory of that shape and
 * those strides, based on x (NumPy makes x's owner its base), as movement.py's kernel makes it; NOT_HANDLED (no exception) otherwise. */
static PyObject *broadcast_view(PyObject *seen, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (n != 1 || !PyDict_CheckExact(seen) || PyDict_GET_SIZE(params) != 1) return NOT_HANDLED;
    PyArrayObject *x = (PyArrayObject *)arrays[0];
    PyObject *shape = PyDict_GetItemWithError(params, S_shape);
    if (shape == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    if (!PyArray_CheckExact(x) || PyDataType_FLAGCHK(PyArray_DESCR(x), NPY_ITEM_REFCOUNT)) return NOT_HANDLED;
    PyObject *x_shape = PyObject_GetAttr((PyObject *)x, S_shape), *x_strides = PyObject_GetAttr((PyObject *)x, S_strides);
    PyObject *key = x_shape && x_strides ? PyTuple_Pack(3, x_shape, x_strides, shape) : NULL;
    Py_XDECREF(x_shape), Py_XDECREF(x_strides);
    if (key == NULL) return NULL;
    PyObject *strides = PyDict_GetItemWithError(seen, key);
    Py_DECREF(key);
    if (strides == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    npy_intp dims[NPY_MAXDIMS], steps[NPY_MAXDIMS];
    int nd = int_items(shape, dims);
    if (nd < 0 || int_items(strides, steps) != nd) return NOT_HANDLED;
    PyArray_Descr *descr = PyArray_DESCR(x);
    Py_INCREF(descr);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, steps, PyArray_DATA(x), 0, NULL);
    if (out == NULL) return NULL;
    Py_INCREF(x);
    if (PyArray_SetBaseObject((PyArrayObject *)out, (PyObject *)x) < 0) return Py_DECREF(out), NULL;
    return out;
}

static PyObject *direct(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (PyTuple_CheckExact(fast) && PyTuple_GET_SIZE(fast) == 2 &&
        PyLong_AsLong(PyTuple_GET_ITEM(fast, 0)) == FAST_BROADCAST)
        return broadcast_view(PyTuple_GET_ITEM(fast, 1), arrays, n, params);
    if (PyErr_Occurred()) return NULL;
    if (PyTuple_CheckExact(fast) && PyTuple_GET_SIZE(fast) >= 7) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(fast, 0));
        if (kind == -1 && PyErr_Occurred()) return NULL;
        if (kind != FAST_BINARY)
            return kind == FAST_ROWS     ? rows_call(fast, arrays, n, params)
                   : kind == FAST_REDUCE ? reduce_call(fast, arrays, n, params)
                   : kind == FAST_MATMUL ? matmul_call(fast, arrays, n, params)
                                         : NOT_HANDLED;
    }
    if (PyTuple_CheckExact(fast) && PyTuple_GET_SIZE(fast) == 1 &&
        PyLong_AsLong(PyTuple_GET_ITEM(fast, 0)) == FAST_CONCAT)
        return concatenated(arrays, n, params);
    if (PyErr_Occurred()) return NULL;
    if (PyTuple_CheckExact(fast) && PyTuple_GET_SIZE(fast) == 1 && n == 1) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(fast, 0));
        if (kind == -1 && PyErr_Occurred()) return NULL;
        return kind >= FAST_RESHAPE && kind <= FAST_SLICE ? view((int)kind, arrays[0], params) : NOT_HANDLED;
    }
    if (!PyTuple_CheckExact(fast) || PyTuple_GET_SIZE(fast) < 6 || PyDict_GET_SIZE(params) != 0) return NOT_HANDLED;
    int kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 0));
    int typenum = (int)PyLong_AsLong(PyTuple_GET_ITEM(fast, 3));
    if (PyErr_Occurred()) return NULL;
    PyArray_Descr *want = PyArray_DescrFromType(typenum);
    if (want == NULL) return NULL;
    Py_DECREF(want); /* a builtin descriptor: NumPy holds it */
    PyArrayObject *a = (PyArrayObject *)arrays[0], *b = n > 1 ? (PyArrayObject *)arrays[1] : NULL;
    const int64_t *dims_arg = NULL;
    int64_t dims[12];
    PyArrayObject *shape_of = a;
    npy_intp bc_shape[NPY_MAXDIMS];
    int bc_nd = -1; /* the output's rank where bc_layout gave it */
    if (kind == FAST_UNARY) {
        if (n != 1 || !PyArray_CheckExact(a) || PyArray_DESCR(a) != want ||
            !PyArray_CHKFLAGS(a, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED))
            return NOT_HANDLED;
    } else if (kind == FAST_BINARY) {
        if (n != 2 || !PyArray_CheckExact(a) || !PyArray_CheckExact(b) || PyArray_DESCR(a) != want ||
            PyArray_DESCR(b) != want || !PyArray_ISALIGNED(a) || !PyArray_ISALIGNED(b))
            return NOT_HANDLED;
        int ca = PyArray_IS_C_CONTIGUOUS(a), cb = PyArray_IS_C_CONTIGUOUS(b);
        if (!(same_dims(a, b) && ca && cb)) {
            /* one operand 0-d, the other C-contiguous and not empty: `_ffi.collapse` merges every
             * dimension of the other into one (size-1 ones skipped) */
            PyArrayObject *full = PyArray_NDIM(a) == 0 ? b : PyArray_NDIM(b) == 0 ? a : NULL;
            if (full != NULL && PyArray_IS_C_CONTIGUOUS(full) && PyArray_SIZE(full) > 0) {
                int64_t size = PyArray_SIZE(full), step = size > 1 ? 1 : 0;
                int64_t layout[12] = {1, 1, 1, size, 0, 0, 0, full == a ? step : 0, 0, 0, 0, full == b ? step : 0};
                memcpy(dims, layout, sizeof(dims));
                shape_of = full;
            } else if (PyTuple_GET_SIZE(fast) > 6) { /* any other broadcast: the wrapper's layout */
                int rc = bc_layout(PyTuple_GET_ITEM(fast, 6), a, b, bc_shape, &bc_nd, dims);
                if (rc <= 0) return rc < 0 ? NULL : NOT_HANDLED;
                for (int d = 0; d < bc_nd; d++)
                    if (bc_shape[d] == 0) return NOT_HANDLED; /* (nothing to compute: the wrapper's) */
            } else {
                return NOT_HANDLED;
            }
            dims_arg = dims;
        }
    } else {
        return NOT_HANDLED;
    }
    if (recording != NULL && recording()) return NOT_HANDLED; /* a tape takes vg_call's calls only */
    void *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, dims_arg ? 2 : 1));
    if (fn == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    long long chunk;
    int threads;
    if (called_int(PyTuple_GET_ITEM(fast, 5), &chunk) < 0 || threads_of(PyTuple_GET_ITEM(fast, 4), &threads) < 0)
        return NULL;
    PyObject *out = bc_nd >= 0 ? PyArray_SimpleNew(bc_nd, bc_shape, typenum)
                               : PyArray_SimpleNew(PyArray_NDIM(shape_of), PyArray_DIMS(shape_of), typenum);
    if (out == NULL) return NULL;
    void *y = PyArray_DATA((PyArrayObject *)out);
    int64_t size = PyArray_SIZE(shape_of);
    Py_BEGIN_ALLOW_THREADS
    if (kind == FAST_UNARY) ((unary_fn)fn)(PyArray_DATA(a), y, size, chunk, threads);
    else if (dims_arg == NULL) ((binary_fn)fn)(PyArray_DATA(a), PyArray_DATA(b), y, size, chunk, threads);
    else ((broadcast_fn)fn)(PyArray_DATA(a), PyArray_DATA(b), y, dims_arg, chunk, threads);
    Py_END_ALLOW_THREADS
    return out;
}

/* whether array `r` is what EagerMode.run keeps as it is: an ndarray of the spec's dtype and shape */
static int conforms(PyObject *r, PyObject *out) {
    if (!PyArray_CheckExact(r)) return 0;
    PyObject *dtype = attr(out, S_dtype);
    if (dtype == NULL) return -1;
    PyObject *np_dtype = attr(dtype, S_np);
    Py_DECREF(dtype);
    if (np_dtype == NULL) return -1;
    int same = (PyObject *)PyArray_DESCR((PyArrayObject *)r) == np_dtype;
    Py_DECREF(np_dtype);
    if (!same) return 0;
    PyObject *shape = attr(out, S_shape);
    if (shape == NULL) return -1;
    int nd = PyArray_NDIM((PyArrayObject *)r);
    same = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == nd;
    for (int d = 0; same && d < nd; d++) {
        PyObject *size = PyTuple_GET_ITEM(shape, d);
        same = PyLong_CheckExact(size) && PyLong_AsSsize_t(size) == PyArray_DIMS((PyArrayObject *)r)[d];
    }
    Py_DECREF(shape);
    if (PyErr_Occurred()) return -1;
    return same;
}

static int is_plain(PyObject *v) {
    PyTypeObject *kind = Py_TYPE(v);
    return kind == &PyLong_Type || kind == &PyBool_Type || kind == &PyFloat_Type || kind == &PyUnicode_Type ||
           v == Py_None || kind == dtype_type;
}

/* whether `v` is a tuple (or a Size) of ints and Nones only (`_op._int_tuples`) */
static int int_tuple(PyObject *v) {
    if (!PyTuple_CheckExact(v) && Py_TYPE(v) != size_type) return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(v); k++) {
        PyObject *item = PyTuple_GET_ITEM(v, k);
        if (!PyLong_CheckExact(item) && item != Py_None) return 0;
    }
    return 1;
}

static char unkeyed; /* `_op._Unkeyed` */
#define UNKEYED ((PyObject *)&unkeyed)

/* `_op._exact_value`: a tuple of ints, Nones, bools, slices of ints and Nones and such tuples as a key
 * that tells each element's type apart; UNKEYED for anything else (NULL with an exception) */
static PyObject *exact_value(PyObject *v) {
    if (PyLong_CheckExact(v) || v == Py_None) return Py_NewRef(v);
    if (PyBool_Check(v)) return Py_BuildValue("(sO)", "bool", v);
    if (PySlice_Check(v)) {
        PySliceObject *s = (PySliceObject *)v;
        PyObject *parts[3] = {s->start, s->stop, s->step};
        for (int k = 0; k < 3; k++)
            if (!PyLong_CheckExact(parts[k]) && parts[k] != Py_None) return UNKEYED;
        return Py_BuildValue("(sOOO)", "slice", s->start, s->stop, s->step);
    }
    if (PyTuple_CheckExact(v)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        PyObject *out = PyTuple_New(n + 1);
        if (out == NULL) return NULL;
        PyTuple_SET_ITEM(out, 0, PyUnicode_FromString("tuple"));
        if (PyTuple_GET_ITEM(out, 0) == NULL) return Py_DECREF(out), NULL;
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *item = exact_value(PyTuple_GET_ITEM(v, k));
            if (item == NULL || item == UNKEYED) return Py_DECREF(out), item;
            PyTuple_SET_ITEM(out, k + 1, item);
        }
        return out;
    }
    return UNKEYED;
}

/* The params (`values`, named by kwnames) keyed as `_op._exact_items` keys them: Py_None where they
 * cannot be keyed, NULL with an exception */
static PyObject *exact_params(PyObject *const *values, PyObject *kwnames, Py_ssize_t m) {
    Py_ssize_t floats = 0;
    int plain = 1, common = 1; /* plain kinds only; or those and tuples of ints and Nones */
    for (Py_ssize_t k = 0; k < m; k++) {
        if (Py_TYPE(values[k]) == &PyFloat_Type) floats++;
        if (!is_plain(values[k])) {
            plain = 0;
            if (!int_tuple(values[k])) common = 0;
        }
    }
    if (plain || common) { /* (*items, kinds, *each float's sign) */
        PyObject *items = PyTuple_New(m + 1 + floats), *kinds = PyTuple_New(m);
        if (items == NULL || kinds == NULL) return Py_XDECREF(items), Py_XDECREF(kinds), NULL;
        PyTuple_SET_ITEM(items, m, kinds);
        for (Py_ssize_t k = 0, f = 0; k < m; k++) {
            PyObject *item = PyTuple_Pack(2, PyTuple_GET_ITEM(kwnames, k), values[k]);
            if (item == NULL) return Py_DECREF(items), NULL;
            PyTuple_SET_ITEM(items, k, item);
            PyTuple_SET_ITEM(kinds, k, Py_NewRef((PyObject *)Py_TYPE(values[k])));
            if (Py_TYPE(values[k]) == &PyFloat_Type) {
                PyObject *sign = PyFloat_FromDouble(copysign(1.0, PyFloat_AS_DOUBLE(values[k])));
                if (sign == NULL) return Py_DECREF(items), NULL;
                PyTuple_SET_ITEM(items, m + 1 + f++, sign);
            }
        }
        return items;
    }
    PyObject *out = PyTuple_New(m); /* ((name, value, kind), ...), a tuple's value as `exact_value` */
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *v = values[k], *kind = (PyObject *)Py_TYPE(v), *value;
        if (PyTuple_CheckExact(v)) {
            value = int_tuple(v) ? Py_NewRef(v) : exact_value(v);
            if (value == UNKEYED) return Py_DECREF(out), Py_NewRef(Py_None);
        } else if (!is_plain(v)) {
            return Py_DECREF(out), Py_NewRef(Py_None);
        } else if (PyFloat_CheckExact(v)) {
            value = Py_BuildValue("(Od)", v, copysign(1.0, PyFloat_AS_DOUBLE(v)));
        } else {
            value = Py_NewRef(v);
        }
        if (value == NULL) return Py_DECREF(out), NULL;
        PyObject *item = PyTuple_Pack(3, PyTuple_GET_ITEM(kwnames, k), value, kind);
        Py_DECREF(value);
        if (item == NULL) return Py_DECREF(out), NULL;
        PyTuple_SET_ITEM(out, k, item);
    }
    return out;
}

/* `kernel(*arrays, **params)` with NumPy's floating-point warnings off, as eager.py's `quietly` runs it
 * once it has made the quiet form of the error state in force; NOT_HANDLED (no exception) before that */
static PyObject *quietly(PyObject *kernel, PyObject **arrays, Py_ssize_t n, PyObject *params) {
    if (error_state == Py_None) return NOT_HANDLED;
    PyObject *state;
    if (PyContextVar_Get(error_state, NULL, &state) < 0) return NULL;
    if (state == NULL) return NOT_HANDLED;
    PyObject *quiet = PyDict_GetItemWithError(quiet_states, state);
    Py_DECREF(state);
    if (quiet == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    PyObject *token = PyContextVar_Set(error_state, quiet);
    if (token == NULL) return NULL;
    PyObject *r = PyObject_VectorcallDict(kernel, arrays, n, PyDict_GET_SIZE(params) ? params : NULL);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int reset = PyContextVar_Reset(error_state, token);
    Py_DECREF(token);
    if (reset < 0) {
        Py_XDECREF(r), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(traceback);
        return NULL;
    }
    PyErr_Restore(type, value, traceback);
    return r;
}

static PyObject *call_op_on(PyObject *op, PyObject *const *in, Py_ssize_t n, PyObject *kwnames, int elementwise);

/* whether eager_mode.run is EagerMode.run as it was at setup (not replaced: a test counting its calls, say):
 * 1, 0, or -1 with an exception. The answer is kept while the mode's instance dict and its type are at the
 * versions it was found at (as `attr` keeps an attribute; elsewhere than CPython 3.11, found every time). */
static int original_run(void) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    static PyObject *dict_seen;
    static uint64_t dict_version_seen;
    static PyTypeObject *type_seen;
    static unsigned int type_version_seen;
    PyTypeObject *tp = Py_TYPE(eager_mode);
    PyObject **at = _PyObject_GetDictPtr(eager_mode);
    PyObject *dict = at == NULL ? NULL : *at;
    int cacheable = dict != NULL && PyDict_CheckExact(dict) && tp->tp_getattro == PyObject_GenericGetAttr;
    if (cacheable && dict == dict_seen && ((PyDictObject *)dict)->ma_version_tag == dict_version_seen &&
        tp == type_seen && tp->tp_version_tag == type_version_seen && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return 1;
    dict_seen = NULL;
#endif
    PyObject *run = PyObject_GetAttr(eager_mode, S_run);
    if (run == NULL) return -1;
    int same = PyMethod_Check(run) && PyMethod_GET_FUNCTION(run) == run_function;
    Py_DECREF(run);
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* kept only where the dict holds no `run` and the type's is the function (a method, as at setup) */
    if (same && cacheable && PyDict_GetItemWithError(dict, S_run) == NULL && !PyErr_Occurred() &&
        _PyType_Lookup(tp, S_run) == run_function && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        dict_seen = dict, dict_version_seen = ((PyDictObject *)dict)->ma_version_tag;
        type_seen = tp, type_version_seen = tp->tp_version_tag;
    }
    if (PyErr_Occurred()) return -1;
#endif
    return same;
}


/* The eager call of `op` on `in` (n operands, then the params named by kwnames): the result tensor,
 * NOT_HANDLED (no exception) where the Python code must run it, or NULL with an exception. */
static PyObject *call_op(PyObject *op, PyObject *const *in, Py_ssize_t n, PyObject *kwnames, int elementwise) {
    if (!ready || n > MAX_OPERANDS) return NOT_HANDLED;
    PyObject *mode = top_of(S_stack);
    if (mode == NULL) return NULL;
    Py_DECREF(mode); /* the thread's stack holds it: only its identity is needed */
    if (mode != eager_mode) return NOT_HANDLED;
    /* EagerMode.run as it was at setup (not replaced: a test counting its calls, say) */
    int same = original_run();
    if (same <= 0) return same < 0 ? NULL : NOT_HANDLED;
    int v = truth(op, S_variadic);
    if (v < 0) return NULL;
    int sequence = v && n > 0 && (PyList_CheckExact(in[0]) || PyTuple_CheckExact(in[0]));
    if (sequence || (!elementwise && n > 1 && !PyObject_TypeCheck(in[1], tensor_type))) {
        /* params after the first argument (`cat([x, y], 0)`, `reshape(x, (2, 3))`), named by the op's
         * `positional` as Op.__call__ names them: the keywords given, then those (added to its dict in
         * that order); a name given both ways, or more than the op names, is Python's to run */
        PyObject *positional = attr(op, S_positional);
        if (positional == NULL) return NULL;
        Py_ssize_t extra = n - 1, m = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
        PyObject *r = NOT_HANDLED, *names = NULL, *items = NULL;
        if (!sequence && PyTuple_CheckExact(positional) && PyTuple_GET_SIZE(positional) == 0) {
            Py_DECREF(positional); /* no params by position: the arguments are all operands */
            return call_op_on(op, in, n, kwnames, elementwise);
        }
        if (!PyTuple_CheckExact(positional) || extra > PyTuple_GET_SIZE(positional) || m + extra > MAX_OPERANDS)
            goto positional_end;
        for (Py_ssize_t j = 0; j < extra; j++)
            for (Py_ssize_t k = 0; k < m; k++) {
                int same = PyUnicode_Compare(PyTuple_GET_ITEM(positional, j), PyTuple_GET_ITEM(kwnames, k));
                if (same == -1 && PyErr_Occurred()) goto positional_failed;
                if (same == 0) goto positional_end;
            }
        names = extra == 0 ? Py_XNewRef(kwnames) : PyTuple_New(m + extra);
        if (extra > 0 && names == NULL) goto positional_failed;
        for (Py_ssize_t k = 0; extra > 0 && k < m; k++)
            PyTuple_SET_ITEM(names, k, Py_NewRef(PyTuple_GET_ITEM(kwnames, k)));
        for (Py_ssize_t j = 0; j < extra; j++) PyTuple_SET_ITEM(names, m + j, Py_NewRef(PyTuple_GET_ITEM(positional, j)));
        PyObject *all[2 * MAX_OPERANDS];
        Py_ssize_t operands = 1;
        if (sequence) { /* cat([x, y], 0): the sequence's items are the operands */
            items = PySequence_Fast(in[0], "");
            if (items == NULL) goto positional_failed;
            operands = PySequence_Fast_GET_SIZE(items);
            if (operands < 1 || operands > MAX_OPERANDS) goto positional_end;
            for (Py_ssize_t j = 0; j < operands; j++) all[j] = PySequence_Fast_GET_ITEM(items, j);
        } else {
            all[0] = in[0];
        }
        for (Py_ssize_t k = 0; k < m; k++) all[operands + k] = in[n + k];
        for (Py_ssize_t j = 0; j < extra; j++) all[operands + m + j] = in[1 + j];
        r = call_op_on(op, all, operands, names, elementwise);
        goto positional_end;
    positional_failed:
        r = NULL;
    positional_end:
        Py_DECREF(positional);
        Py_XDECREF(names);
        Py_XDECREF(items);
        return r;
    }
    return call_op_on(op, in, n, kwnames, elementwise);
}

/* the array owning a's memory (versions.root) */
static PyObject *root_array(PyObject *a) {
    PyObject *b;
    while ((b = PyArray_BASE((PyArrayObject *)a)) != NULL && PyArray_Check(b)) a = b;
    return a;
}

/* whether weak reference `ref` still has its object */
static int alive(PyObject *ref) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o;
    if (PyWeakref_GetRef(ref, &o) < 0) return PyErr_Clear(), 0;
    Py_XDECREF(o);
    return o != NULL;
#else
    return PyWeakref_GET_OBJECT(ref) != Py_None;
#endif
}

/* inplace.note_view for `result` (array `r`, made by `op` from `tensors` without history): where r is memory
 * of an operand (its base), the recipe (op, tensors, params, grad mode) on result._view, and a weak reference
 * to result on base._views ([limit, refs...], as versions.keep_view keeps it: pruned of dead references when
 * it holds more than limit, the limit then twice the live ones, at least VIEWS_KEPT) */
#define VIEWS_KEPT 16
static int note_view(PyObject *result, PyObject *r, PyObject **arrays, PyObject *op, PyObject *tensors,
                     PyObject *params) {
    if (PyArray_BASE((PyArrayObject *)r) == NULL && r != arrays[0]) return 0; /* memory of its own */
    PyObject *owner = root_array(r), *base = NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tensors) && base == NULL; k++)
        if (root_array(arrays[k]) == owner) base = PyTuple_GET_ITEM(tensors, k);
    if (base == NULL) return 0;
    PyObject *on = top_of(S_grad);
    if (on == NULL) return -1;
    int v = PyObject_IsTrue(on);
    Py_DECREF(on);
    if (v < 0) return -1;
    PyObject *recipe = PyTuple_Pack(4, op, tensors, params, v ? Py_True : Py_False);
    if (recipe == NULL) return -1;
    Py_XSETREF(SLOT(result, t_view), recipe);
    PyObject *ref = PyWeakref_NewRef(result, NULL), *refs = SLOT(base, t_views);
    if (ref == NULL) return -1;
    if (refs == NULL || !PyList_CheckExact(refs) || PyList_GET_SIZE(refs) == 0) {
        PyObject *fresh = PyList_New(2);
        if (fresh == NULL) return Py_DECREF(ref), -1;
        PyList_SET_ITEM(fresh, 0, PyLong_FromLong(VIEWS_KEPT));
        PyList_SET_ITEM(fresh, 1, ref);
        if (PyList_GET_ITEM(fresh, 0) == NULL) return Py_DECREF(fresh), -1;
        Py_XSETREF(SLOT(base, t_views), fresh);
        return 0;
    }
    int rc = PyList_Append(refs, ref);
    Py_DECREF(ref);
    Py_ssize_t limit = PyLong_AsSsize_t(PyList_GET_ITEM(refs, 0)), n = PyList_GET_SIZE(refs);
    if (rc < 0 || (limit == -1 && PyErr_Occurred())) return -1;
    if (n - 1 <= limit) return 0;
    Py_ssize_t live = 1; /* prune: the live references moved to the front, in order */
    for (Py_ssize_t k = 1; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(refs, k);
        if (!alive(item)) continue;
        Py_INCREF(item);
        PyList_SetItem(refs, live++, item); /* (drops the reference it replaces) */
    }
    if (PyList_SetSlice(refs, live, n, NULL) < 0) return -1;
    PyObject *next = PyLong_FromSsize_t(2 * (live - 1) > VIEWS_KEPT ? 2 * (live - 1) : VIEWS_KEPT);
    return next == NULL ? -1 : PyList_SetItem(refs, 0, next);
}

/* call_op, the operands given one by one */
static PyObject *call_op_on(PyObject *op, PyObject *const *in, Py_ssize_t n, PyObject *kwnames, int elementwise) {
    int v;
    if (n > MAX_OPERANDS) return NOT_HANDLED; /* none: a factory (full, arange) keyed by its params */
    if (n > 1 && !PyObject_TypeCheck(in[1], tensor_type)) {
        v = truth(op, S_positional);
        if (v != 0) return v < 0 ? NULL : NOT_HANDLED;
    }
    Py_ssize_t scalar_at = -1;
    PyObject *dtype = NULL; /* the tensors' dtype where they share one, else NULL */
    int mixed = 0, dims_seen = 0, scalars_seen = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (PyObject_TypeCheck(in[k], tensor_type)) {
            PyObject *spec = SLOT(in[k], t_spec);
            PyObject *d = attr(spec, S_dtype);
            if (d == NULL) return NULL;
            Py_DECREF(d); /* a dtype lives as long as verigrad */
            if (dtype == NULL && !mixed) dtype = d;
            else if (d != dtype) mixed = 1, dtype = NULL;
            if (elementwise && scalar_at < 0) {
                PyObject *shape = attr(spec, S_shape);
                if (shape == NULL) return NULL;
                if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0) dims_seen = 1;
                else scalars_seen = 1;
                Py_DECREF(shape);
            }
        } else if ((PyFloat_CheckExact(in[k]) || PyLong_CheckExact(in[k])) && scalar_at < 0) {
            scalar_at = k;
        } else {
            return NOT_HANDLED;
        }
    }
    int typenum = dtype == NULL ? -1 : float_typenum(dtype);
    if (scalar_at >= 0 && (n < 2 || typenum < 0)) return NOT_HANDLED;
    if (elementwise && (scalar_at >= 0 || (mixed && dims_seen && scalars_seen))) {
        /* Elementwise._weak_operands: a scalar beside float tensors of one dtype from `first` on takes
         * their dtype; tensors of several dtypes, some with dimensions and some 0-d, are promoted there */
        if (scalar_at < 0) return NOT_HANDLED;
        PyObject *first = attr(op, S_first);
        if (first == NULL) return NULL;
        long f = PyLong_AsLong(first);
        Py_DECREF(first);
        if (f == -1 && PyErr_Occurred()) return NULL;
        if (f != 0) return NOT_HANDLED;
    }
    PyObject *tensors = PyTuple_New(n);
    if (tensors == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t;
        if (k == scalar_at) {
            t = scalar(in[k], typenum, dtype);
            if (t == NOT_HANDLED) return Py_DECREF(tensors), NOT_HANDLED;
            if (t == NULL) return Py_DECREF(tensors), NULL;
        } else {
            t = in[k];
            Py_INCREF(t);
        }
        PyTuple_SET_ITEM(tensors, k, t);
    }
    PyObject *result = NULL, *key = NULL, *params = NULL, *found = NULL, *backend = NULL, *stamp = NULL;
    PyObject *arrays[MAX_OPERANDS] = {NULL};
    Py_ssize_t m = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* the key: the operands' shapes and dtypes, then the params */
    PyObject *canonical = attr(op, S_canonical);
    if (canonical == NULL) goto done;
    Py_ssize_t extra = m == 0 ? 0 : canonical == Py_None ? m : 1;
    key = PyTuple_New(2 * n + extra);
    if (key == NULL) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = SLOT(PyTuple_GET_ITEM(tensors, k), t_spec);
        PyObject *shape = attr(spec, S_shape), *d = attr(spec, S_dtype);
        if (shape == NULL || d == NULL) {
            Py_XDECREF(shape), Py_XDECREF(d);
            goto done;
        }
        PyTuple_SET_ITEM(key, 2 * k, shape);
        PyTuple_SET_ITEM(key, 2 * k + 1, d);
    }
    if (m > 0) {
        params = PyDict_New();
        if (params == NULL) goto done;
        for (Py_ssize_t k = 0; k < m; k++)
            if (PyDict_SetItem(params, PyTuple_GET_ITEM(kwnames, k), in[n + k]) < 0) goto done;
        if (canonical == Py_None) {
            for (Py_ssize_t k = 0; k < m; k++) {
                PyObject *item = PyTuple_Pack(2, PyTuple_GET_ITEM(kwnames, k), in[n + k]);
                if (item == NULL) goto done;
                PyTuple_SET_ITEM(key, 2 * n + k, item);
            }
        } else {
            PyObject *items = exact_params(in + n, kwnames, m);
            if (items == NULL) goto done;
            if (items == Py_None) {
                Py_DECREF(items);
                Py_CLEAR(key);
            } else {
                PyTuple_SET_ITEM(key, 2 * n, items);
            }
        }
    } else {
        params = PyDict_New(); /* the call's own (empty) params: a Node keeps them */
        if (params == NULL) goto done;
    }
    if (key != NULL) {
        PyObject *plans = attr(op, S_plans);
        if (plans == NULL) goto done;
        found = PyDict_Check(plans) ? PyDict_GetItemWithError(plans, key) : NULL;
        Py_XINCREF(found);
        Py_DECREF(plans);
        if (found == NULL && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
            PyErr_Clear(); /* a key that cannot be hashed: planned every time, as in Python */
        }
    }
    if (found == NULL) {
        found = PyObject_CallMethodObjArgs(op, S_plan, eager_mode, tensors, params, key ? key : Py_None, NULL);
        if (found == NULL) goto done;
    }
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2) {
        PyErr_SetString(PyExc_TypeError, "vg_eager: a plan is (canonical params, plan)");
        goto done;
    }
    PyObject *plan = PyTuple_GET_ITEM(found, 1);
    if (PyTuple_GET_ITEM(found, 0) != Py_None) Py_SETREF(params, Py_NewRef(PyTuple_GET_ITEM(found, 0)));
    /* EagerMode.run */
    { /* this thread's innermost backend block, else the process's default */
        PyObject *blocks = PyObject_GetAttr(active, S_stack);
        if (blocks == NULL) goto done;
        PyObject *from = PyList_Check(blocks) && PyList_GET_SIZE(blocks) > 0 ? blocks : active_default;
        if (!PyList_Check(from) || PyList_GET_SIZE(from) == 0) {
            Py_DECREF(blocks);
            goto python_run;
        }
        backend = Py_NewRef(PyList_GET_ITEM(from, PyList_GET_SIZE(from) - 1));
        Py_DECREF(blocks);
    }
    stamp = attr(backend, S_stamp);
    if (stamp == NULL) goto done;
    if (SLOT(plan, p_stamp) != stamp) goto python_run; /* chosen again there */
    PyObject *group = attr(op, S_group);
    if (group == NULL) goto done;
    Py_DECREF(group);
    if (group != Py_None) goto python_run; /* its kernel looked up every time */
    v = PyObject_IsTrue(SLOT(plan, p_native));
    if (v < 0) goto done;
    if (!v) { /* the op's reference: chosen again there if it was replaced */
        PyObject *reference = attr(op, S_reference);
        if (reference == NULL) goto done;
        Py_DECREF(reference);
        if (reference != SLOT(plan, p_kernel)) goto python_run;
    }
    int wanted = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, k);
        arrays[k] = SLOT(t, t_payload);
        if (!PyArray_Check(arrays[k])) goto python_run; /* its error */
        v = PyObject_IsTrue(SLOT(t, t_rg));
        if (v < 0) goto done;
        wanted |= v;
    }
    PyObject *out = SLOT(plan, p_out);
    int needs_grad = 0;
    if (wanted) {
        v = truth(op, S_differentiable);
        if (v < 0) goto done;
        if (v) {
            PyObject *on = top_of(S_grad);
            if (on == NULL) goto done;
            v = PyObject_IsTrue(on);
            Py_DECREF(on);
            if (v < 0) goto done;
        }
        if (v) {
            PyObject *d = attr(out, S_dtype);
            if (d == NULL) goto done;
            PyObject *kind = attr(d, S_kind);
            Py_DECREF(d);
            if (kind == NULL) goto done; /* is_float, as its property reads it: kind == "f" */
            v = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "f") == 0;
            Py_DECREF(kind);
        }
        needs_grad = v;
    }
    PyObject *kernel = SLOT(plan, p_kernel), *fast = SLOT(plan, p_fast);
    PyObject *decompose = attr(op, S_decompose);
    if (decompose == NULL) goto done;
    Py_DECREF(decompose);
    if (decompose != Py_None) { /* a composite op runs its native kernel; else its decomposition there */
        if (kernel == Py_None) goto python_run;
        if (needs_grad) {
            PyObject *vjp = attr(op, S_vjp);
            if (vjp == NULL) goto done;
            Py_DECREF(vjp);
            if (vjp == Py_None) goto python_run;
        }
    }
    PyObject *r = NOT_HANDLED;
    if (fast != Py_None) {
        r = direct(fast, arrays, n, params);
        if (r == NULL) goto done;
    }
    if (r == NOT_HANDLED) {
        v = PyObject_IsTrue(SLOT(plan, p_warns));
        if (v < 0) goto done;
        if (v) {
            r = quietly(kernel, arrays, n, params);
            if (r == NOT_HANDLED) goto python_run; /* the quiet state made there */
        } else {
            r = PyObject_VectorcallDict(kernel, arrays, n, PyDict_GET_SIZE(params) ? params : NULL);
        }
        if (r == NULL) goto done;
    }
    v = conforms(r, out);
    if (v < 0) {
        Py_DECREF(r);
        goto done;
    }
    if (!v) {
        Py_SETREF(r, PyObject_CallFunctionObjArgs(conform_fn, op, r, out, NULL));
        if (r == NULL) goto done;
    }
    result = new_tensor(out, r);
    if (result == NULL) goto done;
    if (!needs_grad) {
        if (note_view(result, r, arrays, op, tensors, params) < 0) Py_CLEAR(result);
        goto done;
    }
    PyObject *node = node_type->tp_alloc(node_type, 0);
    if (node == NULL) {
        Py_CLEAR(result);
        goto done;
    }
    SLOT(node, n_op) = Py_NewRef(op);
    SLOT(node, n_inputs) = Py_NewRef(tensors);
    SLOT(node, n_params) = Py_NewRef(params);
    SLOT(node, n_freed) = Py_NewRef(Py_False);
    SLOT(node, n_stamp) = PyObject_GetAttr(versions_module, S_clock); /* as Node.__init__ */
    if (SLOT(node, n_stamp) == NULL) {
        Py_DECREF(node);
        Py_CLEAR(result);
        goto done;
    }
    Py_SETREF(SLOT(result, t_rg), Py_NewRef(Py_True));
    Py_SETREF(SLOT(result, t_node), node);
    goto done;
python_run:
    result = PyObject_CallMethodObjArgs(eager_mode, S_run, op, tensors, params, PyTuple_GET_ITEM(found, 1), NULL);
done:
    Py_XDECREF(canonical);
    Py_XDECREF(key);
    Py_XDECREF(params);
    Py_XDECREF(found);
    Py_XDECREF(backend);
    Py_XDECREF(stamp);
    Py_DECREF(tensors);
    return result;
}

/* ---- Method: a method descriptor calling `op` ---- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *op;       /* None: Op.__call__, the op is the first argument */
    PyObject *fallback; /* the Python code it stands for, called with the same arguments */
    int swap, elementwise, transpose;
    PyObject *getitem; /* NULL, or the reshape op: x[key] calling the slice op (`op`), then it (`getitem_basic`) */
    PyObject *names, *defaults; /* NULL, or keywords and their values: see method_call */
    PyObject *positional;       /* NULL, or the keywords that may be given by position, in order */
    int shaped;                 /* SHAPED_RESHAPE, SHAPED_VIEW: x.reshape(*shape), x.view(*shape) */
    int along;                  /* x.softmax(axis=-1, dtype=None, *, dim=None) (see `along_axis`) */
    int legacy;                 /* PyTorch's cat(tensors, ...) called as self(tensors, ...) (see `legacy_cat`) */
    int item;                   /* Size.__getitem__: size[i] as tuple's (see `size_item`) */
    PyObject *dict;
} Method;

#define SHAPED_RESHAPE 1
#define SHAPED_VIEW 2
static PyObject *names_shape, *names_axis, *names_axes, *minus_one; /* ("shape",), ("axis",), ("axes",), -1 */

/* x.transpose(a=-2, b=-1) as shaping.transpose's common case: two int axes in range of x's n > 0
 * dimensions swapped, permute(x, axes=...) called; NOT_HANDLED for anything else */
static PyObject *transposed(PyObject *permute, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (kwnames != NULL || n < 1 || n > 3 || !PyObject_TypeCheck(args[0], tensor_type)) return NOT_HANDLED;
    PyObject *shape = attr(SLOT(args[0], t_spec), S_shape);
    if (shape == NULL) return NULL;
    Py_ssize_t ndim = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    Py_DECREF(shape);
    long ab[2] = {-2, -1};
    for (Py_ssize_t k = 1; k < n; k++) {
        if (!PyLong_CheckExact(args[k])) return NOT_HANDLED;
        int overflow;
        ab[k - 1] = PyLong_AsLongAndOverflow(args[k], &overflow);
        if (overflow) return NOT_HANDLED;
        if (ab[k - 1] == -1 && PyErr_Occurred()) return NULL;
    }
    if (ndim < 1 || ndim > NPY_MAXDIMS || ab[0] < -ndim || ab[0] >= ndim || ab[1] < -ndim || ab[1] >= ndim)
        return NOT_HANDLED; /* shaping.transpose says what is wrong, or takes a 0-d tensor */
    Py_ssize_t a = (ab[0] + ndim) % ndim, b = (ab[1] + ndim) % ndim;
    PyObject *axes = PyTuple_New(ndim);
    if (axes == NULL) return NULL;
    for (Py_ssize_t k = 0; k < ndim; k++) {
        PyObject *v = PyLong_FromSsize_t(k == a ? b : k == b ? a : k);
        if (v == NULL) return Py_DECREF(axes), NULL;
        PyTuple_SET_ITEM(axes, k, v);
    }
    PyObject *call[2] = {args[0], axes};
    PyObject *r = call_op(permute, call, 1, names_axes, 0);
    Py_DECREF(axes);
    return r;
}

#define MAX_KEYWORDS 8

/* A Method with keywords (`names`, their `defaults`) takes self and those keywords only: the op is called
 * with every one of them, in their order, the call's value or the default, as its Python method calls it
 * (the same params, the same plan key); NOT_HANDLED for any other call. */
static PyObject *call_with_keywords(Method *m, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    Py_ssize_t count = PyTuple_GET_SIZE(m->names);
    Py_ssize_t by_position = m->positional == NULL ? 0 : PyTuple_GET_SIZE(m->positional);
    if (n < 1 || n - 1 > by_position || count > MAX_KEYWORDS) return NOT_HANDLED;
    PyObject *values[1 + MAX_KEYWORDS];
    char set[MAX_KEYWORDS] = {0};
    values[0] = args[0];
    for (Py_ssize_t j = 0; j < count; j++) values[1 + j] = PyTuple_GET_ITEM(m->defaults, j);
    for (Py_ssize_t k = 1; k < n; k++) { /* x.sum(1, True): the keywords named by `positional`, in order */
        Py_ssize_t j = 0;
        for (; j < count; j++)
            if (PyTuple_GET_ITEM(m->names, j) == PyTuple_GET_ITEM(m->positional, k - 1)) break;
        if (j == count) return NOT_HANDLED;
        values[1 + j] = args[k];
        set[j] = 1;
    }
    Py_ssize_t given = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < given; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t j = 0;
        for (; j < count; j++) {
            int same = PyUnicode_Compare(name, PyTuple_GET_ITEM(m->names, j));
            if (same == -1 && PyErr_Occurred()) return NULL;
            if (same == 0) break;
        }
        if (j == count || set[j]) return NOT_HANDLED; /* another keyword, or one given twice: the fallback
                                                          * says what is wrong */
        values[1 + j] = args[n + k];
    }
    return call_op(m->op, values, 1, m->names, 0);
}

/* x.reshape(*shape) and x.view(*shape) as tensor_methods' reshape and view call the reshape op: shape=
 * the one list or tuple given (as a tuple), else the arguments as a tuple; view only with ints, on a
 * tensor whose array is C-contiguous or empty (view's own checks and view(dtype) are Python's).
 * NOT_HANDLED for anything else. */
static PyObject *shaped_call(Method *m, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (kwnames != NULL || n < 1 || !PyObject_TypeCheck(args[0], tensor_type)) return NOT_HANDLED;
    int one_sequence = n == 2 && (PyList_Check(args[1]) || PyTuple_Check(args[1]));
    if (m->shaped == SHAPED_VIEW) {
        PyObject *a = SLOT(args[0], t_payload);
        if (PyArray_Check(a) && PyArray_SIZE((PyArrayObject *)a) != 0 && !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a))
            return NOT_HANDLED;
        for (Py_ssize_t k = 1; k < n && !one_sequence; k++)
            if (!PyLong_Check(args[k])) return NOT_HANDLED;
    }
    PyObject *shape = one_sequence ? PySequence_Tuple(args[1]) : PyTuple_New(n - 1);
    if (shape == NULL) return NULL;
    for (Py_ssize_t k = 1; k < n && !one_sequence; k++) PyTuple_SET_ITEM(shape, k - 1, Py_NewRef(args[k]));
    PyObject *call[2] = {args[0], shape};
    PyObject *r = call_op(m->op, call, 1, names_shape, 0);
    Py_DECREF(shape);
    return r;
}

/* x.softmax(axis=-1, dtype=None, *, dim=None) as tensor_methods' `_along_axis(..., casts=True)` calls the
 * op: op(x, axis=dim if dim is not None else axis); NOT_HANDLED with a dtype (Python casts first) or
 * anything else. */
static PyObject *along_axis(Method *m, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (n < 1 || n > 3 || !PyObject_TypeCheck(args[0], tensor_type)) return NOT_HANDLED;
    PyObject *axis = n > 1 ? args[1] : NULL, *dtype = n > 2 ? args[2] : NULL, *dim = NULL;
    Py_ssize_t given = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < given; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k), **at;
        if (PyUnicode_CompareWithASCIIString(name, "dim") == 0) at = &dim;
        else if (PyUnicode_CompareWithASCIIString(name, "axis") == 0) at = &axis;
        else if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0) at = &dtype;
        else return NOT_HANDLED;
        if (*at != NULL) return NOT_HANDLED; /* given twice: Python's TypeError */
        *at = args[n + k];
    }
    if (dtype != NULL && dtype != Py_None) return NOT_HANDLED;
    PyObject *call[2] = {args[0], dim != NULL && dim != Py_None ? dim : axis != NULL ? axis : minus_one};
    return call_op(m->op, call, 1, names_axis, 0);
}

/* `op(x, name=value)` as call_op calls it, else (NOT_HANDLED there) as the op's own call does */
static PyObject *call_op_with(PyObject *op, PyObject *x, PyObject *name, PyObject *value) {
    PyObject *call[2] = {x, value};
    PyObject *names = PyTuple_Pack(1, name);
    if (names == NULL) return NULL;
    PyObject *r = call_op(op, call, 1, names, 0);
    if (r == NOT_HANDLED) r = PyObject_Vectorcall(op, call, 1, names);
    Py_DECREF(names);
    return r;
}

/* x[key] as shaping.getitem's basic case of ints and slices only: a slice, an int or a tuple of at most
 * x.ndim of them, padded with slice(None) to one per axis, an int i of an axis of size n (-n <= i < n)
 * read as slice(i % n, i % n + 1); x itself where every slice is slice(None); else the slice op called
 * with index= that tuple, then, where ints dropped axes, the reshape op with the shape of the axes left
 * (an eager view: the mode's made_view does nothing there). NOT_HANDLED for anything else (None, ...,
 * tensors, an int out of range or of a symbolic axis, too many indices, another mode). */
static PyObject *getitem_basic(Method *m, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (kwnames != NULL || n != 2 || !PyObject_TypeCheck(args[0], tensor_type)) return NOT_HANDLED;
    PyObject *key = args[1];
    int is_tuple = PyTuple_CheckExact(key);
    Py_ssize_t k = is_tuple ? PyTuple_GET_SIZE(key) : 1;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *item = is_tuple ? PyTuple_GET_ITEM(key, j) : key;
        if (!PySlice_Check(item) && !PyLong_CheckExact(item)) return NOT_HANDLED;
    }
    PyObject *shape = attr(SLOT(args[0], t_spec), S_shape);
    if (shape == NULL) return NULL;
    Py_ssize_t ndim = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (ndim < k) return Py_DECREF(shape), NOT_HANDLED; /* too many indices: shaping.getitem says so */
    PyObject *index = PyTuple_New(ndim), *r = NOT_HANDLED;
    if (index == NULL) return Py_DECREF(shape), NULL;
    int ints = 0;
    for (Py_ssize_t j = 0; j < ndim; j++) {
        PyObject *s = j >= k ? NULL : is_tuple ? PyTuple_GET_ITEM(key, j) : key;
        if (s == NULL) {
            s = PySlice_New(NULL, NULL, NULL);
        } else if (PyLong_CheckExact(s)) {
            PyObject *size = PyTuple_GET_ITEM(shape, j);
            int overflow;
            long long i = PyLong_AsLongLongAndOverflow(s, &overflow), sz = 0;
            if (!overflow && !(i == -1 && PyErr_Occurred()) && PyLong_CheckExact(size))
                sz = PyLong_AsLongLongAndOverflow(size, &overflow);
            if (PyErr_Occurred()) goto end;
            if (overflow || !PyLong_CheckExact(size) || i < -sz || i >= sz) goto end; /* its error there */
            i = i < 0 ? i + sz : i;
            PyObject *start = PyLong_FromLongLong(i), *stop = PyLong_FromLongLong(i + 1);
            s = start == NULL || stop == NULL ? NULL : PySlice_New(start, stop, NULL);
            Py_XDECREF(start), Py_XDECREF(stop);
            ints = 1;
        } else {
            Py_INCREF(s);
        }
        if (s == NULL) goto failed;
        PyTuple_SET_ITEM(index, j, s);
    }
    PyObject *call[2] = {args[0], index};
    PyObject *names = PyTuple_Pack(1, S_index);
    if (names == NULL) goto failed;
    r = call_op(m->op, call, 1, names, 0);
    Py_DECREF(names);
    if (r == NULL || r == NOT_HANDLED || !ints) goto end;
    /* the axes the slices left, in order: the ints' axes dropped */
    PyObject *sliced_shape = attr(SLOT(r, t_spec), S_shape), *kept = NULL;
    if (sliced_shape == NULL || !PyTuple_Check(sliced_shape) || PyTuple_GET_SIZE(sliced_shape) != ndim) {
        Py_XDECREF(sliced_shape);
        Py_CLEAR(r);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "vg_eager: a slice changed the rank");
        goto end;
    }
    Py_ssize_t left = ndim - k;
    for (Py_ssize_t j = 0; j < k; j++) left += !PyLong_CheckExact(is_tuple ? PyTuple_GET_ITEM(key, j) : key);
    kept = PyTuple_New(left);
    for (Py_ssize_t j = 0, at = 0; kept != NULL && j < ndim; j++)
        if (j >= k || !PyLong_CheckExact(is_tuple ? PyTuple_GET_ITEM(key, j) : key))
            PyTuple_SET_ITEM(kept, at++, Py_NewRef(PyTuple_GET_ITEM(sliced_shape, j)));
    Py_DECREF(sliced_shape);
    if (kept == NULL) {
        Py_CLEAR(r);
        goto end;
    }
    Py_SETREF(r, call_op_with(m->getitem, r, S_shape, kept));
    Py_DECREF(kept);
    goto end;
failed:
    r = NULL;
end:
    Py_DECREF(index);
    Py_DECREF(shape);
    if (r == NOT_HANDLED && PyErr_Occurred()) r = NULL;
    return r;
}

/* PyTorch's cat(tensors, *more, **kwargs) (functions/legacy_cat.py, its self first in args): `op` (concat)
 * called on the rest, where tensors is a tensor, or a list or tuple holding no 1-D empty tensor (the legacy
 * rule's, which Python's cat leaves out); NOT_HANDLED for anything else */
static PyObject *legacy_cat(PyObject *op, PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (n < 2) return NOT_HANDLED;
    PyObject *first = args[1];
    if (PyList_CheckExact(first) || PyTuple_CheckExact(first)) {
        Py_ssize_t count = PySequence_Fast_GET_SIZE(first);
        PyObject **items = PySequence_Fast_ITEMS(first);
        for (Py_ssize_t k = 0; k < count; k++) {
            if (!PyObject_TypeCheck(items[k], tensor_type)) continue;
            PyObject *shape = attr(SLOT(items[k], t_spec), S_shape);
            if (shape == NULL) return NULL;
            int empty = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 1 && PyLong_Check(PyTuple_GET_ITEM(shape, 0)) &&
                        PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0)) == 0;
            Py_DECREF(shape);
            if (PyErr_Occurred()) return NULL;
            if (empty) return NOT_HANDLED;
        }
    } else if (!PyObject_TypeCheck(first, tensor_type)) {
        return NOT_HANDLED;
    }
    return call_op(op, args + 1, n - 1, kwnames, 0);
}

/* Size.__getitem__(self, key) for a key that is not a slice: tuple.__getitem__'s item, as shapes.Size's
 * method answers it (a slice, which makes a Size, and anything else: NOT_HANDLED) */
static PyObject *size_item(PyObject *const *args, Py_ssize_t n, PyObject *kwnames) {
    if (kwnames != NULL || n != 2 || !PyObject_TypeCheck(args[0], size_type) || PySlice_Check(args[1]))
        return NOT_HANDLED;
    return PyTuple_Type.tp_as_mapping->mp_subscript(args[0], args[1]);
}

static PyObject *method_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Method *m = (Method *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *r = NOT_HANDLED;
    if (m->item) {
        if (ready) r = size_item(args, n, kwnames);
    } else if (m->legacy) {
        if (ready) r = legacy_cat(m->op, args, n, kwnames);
    } else if (m->shaped) {
        if (ready) r = shaped_call(m, args, n, kwnames);
    } else if (m->along) {
        if (ready) r = along_axis(m, args, n, kwnames);
    } else if (m->names != NULL) {
        r = call_with_keywords(m, args, n, kwnames);
    } else if (m->getitem != NULL) {
        if (ready) r = getitem_basic(m, args, n, kwnames);
    } else if (m->op == Py_None) {
        if (n >= 1) r = call_op(args[0], args + 1, n - 1, kwnames, m->elementwise);
    } else if (m->transpose) {
        if (ready) r = transposed(m->op, args, n, kwnames);
    } else if (m->swap) {
        if (n == 2 && kwnames == NULL) {
            PyObject *swapped[2] = {args[1], args[0]};
            r = call_op(m->op, swapped, 2, NULL, m->elementwise);
        }
    } else {
        r = call_op(m->op, args, n, kwnames, m->elementwise);
    }
    if (r != NOT_HANDLED) return r;
    return PyObject_Vectorcall(m->fallback, args, n, kwnames);
}

static PyObject *method_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *op, *fallback;
    PyObject *keywords = Py_None, *kw_names = NULL, *kw_defaults = NULL;
    PyObject *getitem = Py_None, *positional = Py_None;
    int swap = 0, elementwise = 0, transpose = 0, shaped = 0, along = 0, legacy = 0, item = 0;
    static char *names[] = {"op", "fallback", "swap", "elementwise", "transpose", "keywords", "getitem",
                            "positional", "shaped", "along", "legacy", "item", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|pppOOOippp:Method", names, &op, &fallback, &swap, &elementwise,
                                     &transpose, &keywords, &getitem, &positional, &shaped, &along, &legacy, &item))
        return NULL;
    if (shaped < 0 || shaped > SHAPED_VIEW) {
        PyErr_Format(PyExc_ValueError, "Method: shaped must be 0, %d (reshape) or %d (view), got %d", SHAPED_RESHAPE,
                     SHAPED_VIEW, shaped);
        return NULL;
    }
    if (positional != Py_None) { /* interned names, each one of the keywords */
        int fine = PyTuple_CheckExact(positional) && PyDict_CheckExact(keywords);
        for (Py_ssize_t k = 0; fine && k < PyTuple_GET_SIZE(positional); k++) {
            PyObject *name = PyTuple_GET_ITEM(positional, k);
            fine = PyUnicode_CheckExact(name) && PyUnicode_CHECK_INTERNED(name) && PyDict_GetItem(keywords, name) != NULL;
        }
        if (!fine) {
            PyErr_Format(PyExc_TypeError, "Method: positional must be a tuple of interned keyword names, got %R",
                         positional);
            return NULL;
        }
    }
    if (keywords != Py_None) {
        if (!PyDict_CheckExact(keywords) || PyDict_GET_SIZE(keywords) > MAX_KEYWORDS) {
            PyErr_Format(PyExc_TypeError, "Method: keywords must be a dict of at most %d keywords and their "
                         "defaults, or None, got %R", MAX_KEYWORDS, keywords);
            return NULL;
        }
        PyObject *keys = PyDict_Keys(keywords), *values = PyDict_Values(keywords);
        kw_names = keys == NULL ? NULL : PyList_AsTuple(keys);
        kw_defaults = values == NULL ? NULL : PyList_AsTuple(values);
        Py_XDECREF(keys), Py_XDECREF(values);
        for (Py_ssize_t k = 0; kw_names != NULL && k < PyTuple_GET_SIZE(kw_names); k++)
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(kw_names, k))) {
                PyErr_Format(PyExc_TypeError, "Method: a keyword must be a str, got %R", PyTuple_GET_ITEM(kw_names, k));
                Py_CLEAR(kw_names);
            }
        if (kw_names == NULL || kw_defaults == NULL) return Py_XDECREF(kw_names), Py_XDECREF(kw_defaults), NULL;
    }
    Method *m = (Method *)type->tp_alloc(type, 0);
    if (m == NULL) return Py_XDECREF(kw_names), Py_XDECREF(kw_defaults), NULL;
    m->vectorcall = method_call;
    m->op = Py_NewRef(op);
    m->fallback = Py_NewRef(fallback);
    m->swap = swap, m->elementwise = elementwise, m->transpose = transpose;
    m->getitem = getitem == Py_None ? NULL : Py_NewRef(getitem);
    m->names = kw_names, m->defaults = kw_defaults;
    m->positional = positional == Py_None ? NULL : Py_NewRef(positional);
    m->shaped = shaped, m->along = along, m->legacy = legacy, m->item = item;
    return (PyObject *)m;
}

static int method_traverse(PyObject *self, visitproc visit, void *arg) {
    Method *m = (Method *)self;
    Py_VISIT(m->op);
    Py_VISIT(m->fallback);
    Py_VISIT(m->names);
    Py_VISIT(m->defaults);
    Py_VISIT(m->positional);
    Py_VISIT(m->getitem);
    Py_VISIT(m->dict);
    return 0;
}

static int method_clear(PyObject *self) {
    Method *m = (Method *)self;
    Py_CLEAR(m->op);
    Py_CLEAR(m->fallback);
    Py_CLEAR(m->names);
    Py_CLEAR(m->defaults);
    Py_CLEAR(m->positional);
    Py_CLEAR(m->getitem);
    Py_CLEAR(m->dict);
    return 0;
}

static void method_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    method_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *method_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef method_members[] = {
    {"op", T_OBJECT, offsetof(Method, op), READONLY, "the op it calls (None: the first argument)"},
    {"fallback", T_OBJECT, offsetof(Method, fallback), READONLY, "the Python code it stands for"},
    {"__wrapped__", T_OBJECT, offsetof(Method, fallback), READONLY, "the Python code (its signature)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject MethodType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vg_eager.Method",
    .tp_basicsize = sizeof(Method),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_HAVE_GC,
    .tp_vectorcall_offset = offsetof(Method, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = method_new,
    .tp_traverse = method_traverse,
    .tp_clear = method_clear,
    .tp_dealloc = method_dealloc,
    .tp_descr_get = method_get,
    .tp_dictoffset = offsetof(Method, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_members = method_members,
    .tp_doc = "Method(op, fallback, swap=False, elementwise=False, transpose=False, names=None): an op's eager "
              "call in C (vg_eager.c); with transpose, x.transpose(a, b) calling the permute op; with keywords (a "
              "dict: names and defaults), C takes only self and those keywords and passes them all, in order; with getitem (the reshape op), x[ints and slices] calling the slice op, then it.",
};

/* setup(Tensor, Plan, Node, DType, Size, f32, f64, eager_mode, local, active, active_default, versions,
 * conform, error_state, quiet, recording): the objects the calls read, and vg_call's recording test (a capsule, or None) */
static PyObject *setup(PyObject *module, PyObject *args) {
    PyObject *tensor, *plan, *node, *dtype, *size, *f32, *f64, *mode, *loc, *act, *dflt, *vers, *conf, *state,
        *quiet, *rec;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OOOOOO!OOOO!O:setup", &PyType_Type, &tensor, &PyType_Type, &plan,
                          &PyType_Type, &node, &PyType_Type, &dtype, &PyType_Type, &size, &f32, &f64, &mode, &loc,
                          &act, &PyList_Type, &dflt, &vers, &conf, &state, &PyDict_Type, &quiet, &rec))
        return NULL;
    ready = 0;
    PyTypeObject *t = (PyTypeObject *)tensor, *p = (PyTypeObject *)plan, *nd = (PyTypeObject *)node;
    if (offset_of(t, "spec", &t_spec) || offset_of(t, "payload", &t_payload) || offset_of(t, "grad", &t_grad) ||
        offset_of(t, "_node", &t_node) || offset_of(t, "_hooks", &t_hooks) || offset_of(t, "requires_grad", &t_rg) ||
        offset_of(t, "_view", &t_view) || offset_of(t, "_views", &t_views) ||
        offset_of(p, "kernel", &p_kernel) || offset_of(p, "native", &p_native) || offset_of(p, "out", &p_out) ||
        offset_of(p, "stamp", &p_stamp) || offset_of(p, "warns", &p_warns) || offset_of(p, "fast", &p_fast) ||
        offset_of(nd, "op", &n_op) || offset_of(nd, "inputs", &n_inputs) || offset_of(nd, "params", &n_params) ||
        offset_of(nd, "freed", &n_freed) || offset_of(nd, "stamp", &n_stamp))
        return NULL;
    if (rec != Py_None) {
        recording = (int (*)(void))PyCapsule_GetPointer(rec, "vg_call.recording");
        if (recording == NULL) return NULL;
    }
    Py_XSETREF(tensor_type, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(node_type, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(dtype_type, (PyTypeObject *)Py_NewRef(dtype));
    Py_XSETREF(size_type, (PyTypeObject *)Py_NewRef(size));
    Py_XSETREF(dtype_f32, Py_NewRef(f32));
    Py_XSETREF(dtype_f64, Py_NewRef(f64));
    Py_XSETREF(eager_mode, Py_NewRef(mode));
    Py_XSETREF(local, Py_NewRef(loc));
    Py_XSETREF(active, Py_NewRef(act));
    Py_XSETREF(active_default, Py_NewRef(dflt));
    Py_XSETREF(versions_module, Py_NewRef(vers));
    if (state != Py_None && !PyContextVar_CheckExact(state))
        return PyErr_Format(PyExc_TypeError, "vg_eager: the error state is a ContextVar or None");
    Py_XSETREF(error_state, Py_NewRef(state));
    Py_XSETREF(quiet_states, Py_NewRef(quiet));
    Py_XSETREF(conform_fn, Py_NewRef(conf));
    PyObject *run = PyObject_GetAttrString(mode, "run");
    if (run == NULL) return NULL;
    if (!PyMethod_Check(run)) return Py_DECREF(run), PyErr_Format(PyExc_TypeError, "vg_eager: mode.run is a method");
    Py_XSETREF(run_function, Py_NewRef(PyMethod_GET_FUNCTION(run)));
    Py_DECREF(run);
    Py_XSETREF(constant, PyObject_GetAttrString(mode, "constant"));
    Py_CLEAR(scalar_specs[0]);
    Py_CLEAR(scalar_specs[1]);
    if (constant == NULL) return NULL;
    ready = 1;
    Py_RETURN_NONE;
}

/* readers(threads_property, thread_setting, chunk_setting, environ, thread_key, chunk_key, bufsize, seen,
 * numpy_state): what the direct calls read their settings through (see `count_value`); environ None: the
 * settings' `get` called every time; bufsize None: called every time */
static PyObject *readers(PyObject *module, PyObject *args) {
    PyObject *prop, *ts, *cs, *env, *tk, *ck, *bs, *seen, *state;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:readers", &prop, &ts, &cs, &env, &tk, &ck, &bs, &seen, &state)) return NULL;
    if ((env != Py_None && !PyDict_CheckExact(env)) ||
        (bs != Py_None && (!PyList_CheckExact(seen) || PyList_GET_SIZE(seen) != 1 || !PyContextVar_CheckExact(state))))
        return PyErr_Format(PyExc_TypeError, "readers: environ is a dict or None; bufsize's seen a 1-item list "
                                             "and the state a ContextVar");
    PyObject *tget = PyObject_GetAttrString(ts, "get"), *cget = PyObject_GetAttrString(cs, "get");
    if (tget == NULL || cget == NULL) return Py_XDECREF(tget), Py_XDECREF(cget), NULL;
    count_reader *rs[2] = {&thread_count, &chunk_count};
    PyObject *settings[2] = {ts, cs}, *gets[2] = {tget, cget}, *keys[2] = {tk, ck};
    for (int k = 0; k < 2; k++) {
        Py_XSETREF(rs[k]->setting, Py_NewRef(settings[k]));
        Py_XSETREF(rs[k]->get, gets[k]); /* (its reference) */
        Py_XSETREF(rs[k]->environ, env == Py_None ? NULL : Py_NewRef(env));
        Py_XSETREF(rs[k]->key, Py_NewRef(keys[k]));
    }
    Py_XSETREF(threads_property, Py_NewRef(prop));
    Py_XSETREF(bufsize_fn, bs == Py_None ? NULL : Py_NewRef(bs));
    Py_XSETREF(bufsize_seen, Py_NewRef(seen));
    Py_XSETREF(numpy_state, Py_NewRef(state));
    Py_RETURN_NONE;
}

/* read(backend, chunk, block): (backend.threads, chunk(), block()) as a direct call reads them */
static PyObject *read_settings(PyObject *module, PyObject *args) {
    PyObject *backend, *chunk_fn, *block_fn;
    if (!PyArg_ParseTuple(args, "OOO:read", &backend, &chunk_fn, &block_fn)) return NULL;
    long long chunk, block;
    int threads;
    if (threads_of(backend, &threads) < 0 || called_int(chunk_fn, &chunk) < 0 || called_int(block_fn, &block) < 0)
        return NULL;
    return Py_BuildValue("(iLL)", threads, chunk, block);
}

/* shape_of(x): Tensor.shape as the property written in Python reads it, x.spec.size (a Size the spec made
 * once), without its Python frame; that property (`shape_python`, given by `shape_fallback`) where the calls
 * are off or x is not a tensor with a spec */
static PyObject *shape_python;
static PyObject *shape_of(PyObject *module, PyObject *x) {
    if (ready && PyObject_TypeCheck(x, tensor_type) && SLOT(x, t_spec) != NULL) return attr(SLOT(x, t_spec), S_size);
    if (shape_python == NULL) return PyErr_Format(PyExc_RuntimeError, "vg_eager: shape_fallback first");
    return PyObject_CallOneArg(shape_python, x);
}

static PyObject *shape_fallback(PyObject *module, PyObject *fget) {
    Py_XSETREF(shape_python, Py_NewRef(fget));
    Py_RETURN_NONE;
}

/* enabled(flag): calls go to their fallbacks while off (a test compares both ways) */
static PyObject *enabled(PyObject *module, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    if (on && tensor_type == NULL) return PyErr_Format(PyExc_RuntimeError, "vg_eager: setup first");
    int was = ready;
    ready = on;
    return PyBool_FromLong(was);
}

static PyObject *topological(PyObject *module, PyObject *const *args, Py_ssize_t nargs); /* backward.c */

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Tensor, Plan, Node, DType, Size, f32, f64, mode, local, active, active_default, versions, conform, "
                                   "error_state, quiet, recording)"},
    {"enabled", enabled, METH_O, "enabled(flag): turn the C calls on or off; gives the previous state"},
    {"shape_of", shape_of, METH_O, "shape_of(x): x.spec.size (Tensor.shape)"},
    {"shape_fallback", shape_fallback, METH_O, "shape_fallback(fget): what shape_of calls while the calls are off"},
    {"read", read_settings, METH_VARARGS, "read(backend, chunk, block): (backend.threads, chunk(), block()) as a "
                                          "direct call reads them"},
    {"readers", readers, METH_VARARGS, "readers(threads_property, thread_setting, chunk_setting, environ, "
                                       "thread_key, chunk_key, bufsize, seen, numpy_state)"},
    {"topological", (PyCFunction)(void (*)(void))topological, METH_FASTCALL,
     "topological(roots, last): autograd._topological's order, or None where the Python walk must run"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "vg_eager", NULL, -1, methods};

static int intern(PyObject **at, const char *text) {
    *at = PyUnicode_InternFromString(text);
    return *at == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit_vg_eager(void) {
    import_array();
    if (intern(&S_stack, "stack") || intern(&S_grad, "grad") || intern(&S_plans, "_eager_plans") ||
        intern(&S_variadic, "variadic") || intern(&S_positional, "positional") ||
        intern(&S_canonical, "canonical_params") || intern(&S_decompose, "decompose") || intern(&S_group, "group") ||
        intern(&S_differentiable, "differentiable") || intern(&S_vjp, "vjp") || intern(&S_reference, "reference") || intern(&S_shape, "shape") ||
        intern(&S_dtype, "dtype") || intern(&S_kind, "kind") || intern(&S_np, "np") ||
        intern(&S_threads, "threads") || intern(&S_first, "first") || intern(&S_stamp, "stamp") ||
        intern(&S_plan, "_plan") || intern(&S_run, "run") ||
        intern(&S_axes, "axes") || intern(&S_index, "index") || intern(&S_axis, "axis") ||
        intern(&S_keepdim, "keepdim") || intern(&S_explicit, "explicit") || intern(&S_seen, "_seen") ||
        intern(&S_direct, "direct") || intern(&S_strides, "strides") || intern(&S_fast, "fast") ||
        intern(&S_clock, "clock") || intern(&S_size, "size"))
        return NULL;
    names_shape = PyTuple_Pack(1, S_shape), names_axis = PyTuple_Pack(1, S_axis), names_axes = PyTuple_Pack(1, S_axes);
    minus_one = PyLong_FromLong(-1);
    if (names_shape == NULL || names_axis == NULL || names_axes == NULL || minus_one == NULL) return NULL;
    if (PyType_Ready(&MethodType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&MethodType);
    if (PyModule_AddObject(m, "Method", (PyObject *)&MethodType) < 0) return Py_DECREF(&MethodType), Py_DECREF(m), NULL;
    return m;
}
