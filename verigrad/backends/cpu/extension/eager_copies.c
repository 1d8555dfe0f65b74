/* vg_eager's copies of movement ops (see eager_fast.c's `direct`): a reshape that copies and a
 * concatenation, made by movement.c's vg_copy and vg_join where movement.py gives their addresses
 * (`fast` = (kind, fn, backend, min_chunk)), the pool's threads splitting the bytes, or as NumPy makes
 * them on the caller. Compiled after eager_fast.c, as one translation unit with it (its `called_int` and
 * `threads_of`). */
typedef void (*copy_fn)(const char *, char *, const int64_t *, int64_t, int64_t, int);
typedef void (*join_fn)(const char *const *, const int64_t *, int64_t, char *, int64_t, int64_t, int);

/* A movement call's pool (`fast` = (kind, fn, backend, min_chunk), movement.py): fn's address,
 * backend.threads and min_chunk() into the pointers: 1; 0 where the call copies on this thread as NumPy
 * does (`fast` = (kind,), another backend's call: the reference backend's is NumPy's, or this thread
 * records a tape: vg_call's calls only); -1 with an exception */
static int pool_of(PyObject *fast, void **fn, int *threads, long long *chunk) {
    if (PyTuple_GET_SIZE(fast) != 4 || PyTuple_GET_ITEM(fast, 2) != call_backend || (recording != NULL && recording()))
        return 0;
    *fn = PyLong_AsVoidPtr(PyTuple_GET_ITEM(fast, 1));
    if (*fn == NULL) return PyErr_Occurred() ? -1 : 0;
    if (called_int(PyTuple_GET_ITEM(fast, 3), chunk) < 0 || threads_of(PyTuple_GET_ITEM(fast, 2), threads) < 0)
        return -1;
    return 1;
}

/* x.reshape(shape) where NumPy copies (x not C-contiguous, and x.reshape(shape, copy=False) refuses): x's
 * elements in C order into a new array of the shape by movement.c's vg_copy, the threads splitting them
 * (the same bytes as NumPy's copy, made on the caller alone), for x of rank 4 at most and items of 1, 2,
 * 4 or 8 bytes without object references; the view where NumPy makes one. NOT_HANDLED (no exception)
 * where NumPy's reshape must run (or raise). */
static PyObject *reshape_copied(PyObject *fast, PyArrayObject *x, PyObject *shape, PyArray_Dims *dims) {
    PyArray_Descr *descr = PyArray_DESCR(x);
    const int nd = PyArray_NDIM(x);
    const npy_intp item = PyArray_ITEMSIZE(x);
    if (PyTuple_GET_SIZE(fast) != 4 || PyArray_IS_C_CONTIGUOUS(x) || nd > 4 || PyArray_SIZE(x) == 0 ||
        PyDataType_FLAGCHK(descr, NPY_ITEM_REFCOUNT) || (item != 1 && item != 2 && item != 4 && item != 8))
        return NOT_HANDLED;
    npy_intp size = 1;
    for (int d = 0; d < dims->len; d++) {
        if (dims->ptr[d] < 0) return NOT_HANDLED;
        size *= dims->ptr[d];
    }
    if (size != PyArray_SIZE(x)) return NOT_HANDLED;
    void *fn;
    int threads;
    long long chunk;
    int pool = pool_of(fast, &fn, &threads, &chunk);
    if (pool <= 0) return pool < 0 ? NULL : NOT_HANDLED;
    PyObject *args[3] = {(PyObject *)x, shape, Py_False};
    PyObject *r = PyObject_VectorcallMethod(S_reshape, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, S_copy_kw);
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_ValueError)) /* a view, or no copy= (NumPy < 2.1) */
        return r != NULL ? r : (PyErr_ExceptionMatches(PyExc_TypeError) ? (PyErr_Clear(), NOT_HANDLED) : NULL);
    PyErr_Clear(); /* a copy is needed */
    int64_t d[8];
    for (int k = 0; k < 4; k++) {
        const int a = k - (4 - nd);
        d[k] = a < 0 ? 1 : PyArray_DIMS(x)[a];
        d[4 + k] = a < 0 ? 0 : PyArray_STRIDES(x)[a];
    }
    Py_INCREF(descr);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, dims->len, dims->ptr, NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    const char *src = PyArray_BYTES(x);
    char *to = PyArray_BYTES((PyArrayObject *)out);
    Py_BEGIN_ALLOW_THREADS
    ((copy_fn)fn)(src, to, d, item, chunk, threads);
    Py_END_ALLOW_THREADS
    return out;
}

/* np.concatenate(arrays, axis) where the arrays are C-contiguous, of one plain dtype (no object references)
 * and one rank, and agree off `axis`: NumPy's result then is a new C-contiguous array (its layout follows
 * the inputs' strides, which are C order on every axis longer than 1), whose rows are the inputs' blocks
 * copied in order; made so here, without NumPy's general loop. NOT_HANDLED (no exception) otherwise. */
static PyObject *copied_together(PyObject *fast, PyObject **arrays, Py_ssize_t n, long axis) {
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
    void *fn;
    int threads;
    long long chunk;
    int pool = n <= MAX_JOINED ? pool_of(fast, &fn, &threads, &chunk) : 0;
    if (pool < 0) return Py_DECREF(out), NULL;
    if (pool) { /* movement.c's vg_join: the rows split between the threads */
        const char *srcs[MAX_JOINED];
        int64_t blocks[MAX_JOINED], row = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            srcs[k] = PyArray_BYTES((PyArrayObject *)arrays[k]);
            blocks[k] = PyArray_DIMS((PyArrayObject *)arrays[k])[axis] * inner;
            row += blocks[k];
        }
        int64_t min_rows = row > 0 ? chunk * PyArray_ITEMSIZE(first) / row : 1;
        Py_BEGIN_ALLOW_THREADS
        ((join_fn)fn)(srcs, blocks, n, to, outer, min_rows < 1 ? 1 : min_rows, threads);
        Py_END_ALLOW_THREADS
        return out;
    }
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
static PyObject *concatenated(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params) {
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
    PyObject *r = copied_together(fast, arrays, n, a);
    if (r != NOT_HANDLED) return r;
    PyObject *list = PyList_New(n);
    if (list == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) PyList_SET_ITEM(list, k, Py_NewRef(arrays[k]));
    r = PyArray_Concatenate(list, (int)a);
    Py_DECREF(list);
    return r;
}
