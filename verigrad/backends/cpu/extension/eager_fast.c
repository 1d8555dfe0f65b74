/* vg_eager's fast paths (see vg_eager.c): the kernel of a plan that says `fast` called directly, on arrays
 * allocated here, with exactly the arguments its Python wrapper would pass (`direct`: element-wise unary and
 * binary, softmax and log_softmax rows, reductions, matmul, broadcast_to, reshape, permute, slice and
 * concatenation: eager_copies.c's copies), and the thread and chunk settings those calls read (`readers`, `read_settings`). Compiled
 * after eager.h, eager_support.c and vg_eager.c, as one translation unit with them. */
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

/* A view kernel (`fast` = (kind,), or for reshape (kind, vg_copy, backend, min_chunk): `reshape_copied`) as
 * the NumPy method its reference calls: x.reshape(shape), x.transpose(axes) (the one param a tuple of
 * ints) or x[slices]; NOT_HANDLED (no exception) otherwise. */
static PyObject *view(PyObject *fast, int kind, PyObject *x, PyObject *params) {
    if (!PyArray_CheckExact(x) || PyDict_GET_SIZE(params) != 1) return NOT_HANDLED; /* (a subclass's own) */
    PyObject *name = kind == FAST_RESHAPE ? S_shape : kind == FAST_PERMUTE ? S_axes : S_index;
    PyObject *value = PyDict_GetItemWithError(params, name);
    if (value == NULL) return PyErr_Occurred() ? NULL : NOT_HANDLED;
    if (kind == FAST_SLICE) return sliced(x, value);
    npy_intp items[NPY_MAXDIMS];
    int n = int_items(value, items);
    if (n < 0) return NOT_HANDLED;
    PyArray_Dims dims = {items, n};
    if (kind == FAST_RESHAPE) {
        PyObject *r = reshape_copied(fast, (PyArrayObject *)x, value, &dims);
        return r != NOT_HANDLED ? r : PyArray_Newshape((PyArrayObject *)x, &dims, NPY_CORDER);
    }
    return PyArray_Transpose((PyArrayObject *)x, &dims);
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

/* a new reference to exact_default()'s value, read as it reads it where `state` = (_setting, _state,
 * _held): _setting[0] or the thread's _held where true, else not _state["fast"] once that is known; else
 * exact_default() itself */
static PyObject *exact_flag(PyObject *exact_default, PyObject *state) {
    if (PyTuple_CheckExact(state) && PyTuple_GET_SIZE(state) == 3 && PyList_CheckExact(PyTuple_GET_ITEM(state, 0)) &&
        PyList_GET_SIZE(PyTuple_GET_ITEM(state, 0)) == 1 && PyDict_CheckExact(PyTuple_GET_ITEM(state, 1)) &&
        PyContextVar_CheckExact(PyTuple_GET_ITEM(state, 2))) {
        PyObject *setting = PyList_GET_ITEM(PyTuple_GET_ITEM(state, 0), 0), *held = NULL;
        if (PyBool_Check(setting) && setting == Py_True) return Py_NewRef(setting);
        if (PyContextVar_Get(PyTuple_GET_ITEM(state, 2), NULL, &held) < 0) return NULL;
        if (held == Py_True) return held; /* PyContextVar_Get gave a new reference */
        int other = held == NULL || held == Py_False;
        Py_XDECREF(held);
        PyObject *known = PyDict_GetItemWithError(PyTuple_GET_ITEM(state, 1), S_fast);
        if (known == NULL && PyErr_Occurred()) return NULL;
        if (other && PyBool_Check(setting) && known != NULL && PyBool_Check(known))
            return Py_NewRef(known == Py_True ? Py_False : Py_True);
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
    if (PyTuple_CheckExact(fast) && (PyTuple_GET_SIZE(fast) == 1 || PyTuple_GET_SIZE(fast) == 4) &&
        PyLong_AsLong(PyTuple_GET_ITEM(fast, 0)) == FAST_CONCAT)
        return concatenated(fast, arrays, n, params);
    if (PyErr_Occurred()) return NULL;
    if (PyTuple_CheckExact(fast) && (PyTuple_GET_SIZE(fast) == 1 || PyTuple_GET_SIZE(fast) == 4) && n == 1) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(fast, 0));
        if (kind == -1 && PyErr_Occurred()) return NULL;
        return kind >= FAST_RESHAPE && kind <= FAST_SLICE ? view(fast, (int)kind, arrays[0], params) : NOT_HANDLED;
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
