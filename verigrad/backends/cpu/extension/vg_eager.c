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
/* The module: this file holds the eager call of an op (`call_op`), `setup` and the module's functions; what
 * the call reads is eager_support.c's, the direct kernel calls eager_fast.c's, the Method descriptor
 * eager_method.c's (eager.h: what they share). */

/* The eager call of `op` on `in` (n operands, then the params named by kwnames): the result tensor,
 * NOT_HANDLED (no exception) where the Python code must run it, or NULL with an exception. */
static PyObject *call_op_on(PyObject *op, PyObject *const *in, Py_ssize_t n, PyObject *kwnames, int elementwise);

static PyObject *call_op(PyObject *op, PyObject *const *in, Py_ssize_t n, PyObject *kwnames, int elementwise) {
    if (!ready || n > MAX_OPERANDS) return NOT_HANDLED;
    if (kwnames != NULL) /* `out=`, and operands by PyTorch's keywords (`add(input=x, other=y)`, `stack(tensors=
                            [x, y])`): Op.__call__ takes them */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, k);
            if (PyUnicode_Compare(name, S_out) == 0) return NOT_HANDLED;
            if (n == 0 && (PyUnicode_Compare(name, S_input) == 0 || PyUnicode_Compare(name, S_tensors) == 0))
                return NOT_HANDLED;
        }
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
        call_backend = backend;
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
        intern(&S_clock, "clock") || intern(&S_size, "size") || intern(&S_input, "input") ||
        intern(&S_tensors, "tensors") || intern(&S_out, "out") || intern(&S_reshape, "reshape"))
        return NULL;
    names_shape = PyTuple_Pack(1, S_shape), names_axis = PyTuple_Pack(1, S_axis), names_axes = PyTuple_Pack(1, S_axes);
    minus_one = PyLong_FromLong(-1), S_copy_kw = Py_BuildValue("(s)", "copy");
    if (names_shape == NULL || names_axis == NULL || names_axes == NULL || minus_one == NULL || S_copy_kw == NULL)
        return NULL;
    if (PyType_Ready(&MethodType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&MethodType);
    if (PyModule_AddObject(m, "Method", (PyObject *)&MethodType) < 0) return Py_DECREF(&MethodType), Py_DECREF(m), NULL;
    return m;
}
