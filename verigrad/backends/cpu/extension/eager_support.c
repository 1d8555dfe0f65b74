/* vg_eager's support (see vg_eager.c): what the eager call of an op reads on every call. Slot offsets,
 * attributes kept while their dicts are unchanged, the mode stack's top, new tensors, Python numbers beside
 * float tensors, the params keyed as the plan key keys them (`_op._exact_items`), a kernel run with NumPy's
 * warnings off, and whether EagerMode.run is the original. Compiled after eager.h, before vg_eager.c, as one
 * translation unit with them. */

/* the offset of slot `name` of `type` (a member descriptor in its dict, else in its base's: Tensor's slots
 * are its base's, two of them behind properties) */
static int offset_of(PyTypeObject *type, const char *name, Py_ssize_t *out) {
    PyObject *d = PyDict_GetItemString(type->tp_dict, name);
    PyTypeObject *base = type->tp_base;
    if ((d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) && base != NULL && base != &PyBaseObject_Type)
        return offset_of(base, name, out);
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
