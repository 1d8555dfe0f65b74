/* vg_eager's Method: a method descriptor calling `op` (see vg_eager.c), bound on Tensor as its methods and
 * operators, with the fast paths of the methods that would only repeat known steps in Python (transpose,
 * keywords, reshape and view, softmax along an axis, basic getitem, PyTorch's cat, Size's items). Compiled
 * after eager.h, eager_support.c, vg_eager.c and eager_fast.c, as one translation unit with them. */
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
