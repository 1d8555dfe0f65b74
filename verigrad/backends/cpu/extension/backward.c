/* The backward engine's walk in C: autograd._topological's loop over the Node graph (Tensor's and
 * Node's slots read at the offsets `setup` found). Compiled as part of vg_eager (fastcall appends this
 * file to its others): it reads eager.h's slot offsets and `ready`.
 *
 * The order is the Python walk's, item by item (the same stack, pushed and popped in the same order), so
 * the gradient contributions are summed in the same order. Where the Python walk would have more to do
 * (a node made before the last recorded in-place write: a view's history may be made again), or an
 * object is not what the walk expects, it answers None and the Python code walks. */

struct walk_item {
    PyObject *t; /* borrowed: the graph holds it, and nothing here runs Python code */
    int done;
};

static int walk_push(struct walk_item **stack, Py_ssize_t *top, Py_ssize_t *cap, PyObject *t, int done) {
    if (*top == *cap) {
        Py_ssize_t more = *cap * 2;
        struct walk_item *grown = PyMem_Realloc(*stack, (size_t)more * sizeof **stack);
        if (grown == NULL) return PyErr_NoMemory(), -1;
        *stack = grown, *cap = more;
    }
    (*stack)[*top].t = t, (*stack)[*top].done = done;
    ++*top;
    return 0;
}

/* 1 if `key` (a pointer) is in `seen`, 0 if not, -1 with an exception */
static int walk_seen(PyObject *seen, PyObject *t) {
    PyObject *key = PyLong_FromVoidPtr(t);
    if (key == NULL) return -1;
    int r = PySet_Contains(seen, key);
    Py_DECREF(key);
    return r;
}

static int walk_visit(PyObject *seen, PyObject *t) {
    PyObject *key = PyLong_FromVoidPtr(t);
    if (key == NULL) return -1;
    int r = PySet_Add(seen, key);
    Py_DECREF(key);
    return r;
}

/* topological(roots, last): the tensors leading to the list `roots`, inputs before the tensors made from
 * them (autograd._topological's order); None where the Python walk must run (see above) */
static PyObject *topological(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "vg_eager.topological(roots: list, last: int)");
    if (!ready) Py_RETURN_NONE;
    long long last = PyLong_AsLongLong(args[1]);
    if (last == -1 && PyErr_Occurred()) return NULL;
    PyObject *roots = args[0];
    Py_ssize_t nroots = PyList_GET_SIZE(roots), cap = 64, top = 0;
    for (Py_ssize_t i = 0; i < nroots; i++)
        if (!PyObject_TypeCheck(PyList_GET_ITEM(roots, i), tensor_type)) Py_RETURN_NONE;
    struct walk_item *stack = PyMem_Malloc((size_t)cap * sizeof *stack);
    PyObject *seen = PySet_New(NULL), *order = PyList_New(0);
    if (stack == NULL || seen == NULL || order == NULL) goto fail;
    for (Py_ssize_t i = nroots - 1; i >= 0; i--)
        if (walk_push(&stack, &top, &cap, PyList_GET_ITEM(roots, i), 0)) goto fail;
    while (top > 0) {
        struct walk_item it = stack[--top];
        if (it.done) {
            if (PyList_Append(order, it.t)) goto fail;
            continue;
        }
        int r = walk_seen(seen, it.t);
        if (r < 0) goto fail;
        if (r) continue;
        if (walk_visit(seen, it.t) || walk_push(&stack, &top, &cap, it.t, 1)) goto fail;
        PyObject *node = SLOT(it.t, t_node);
        if (node == NULL) goto python;
        if (node == Py_None) continue;
        if (Py_TYPE(node) != node_type) goto python;
        PyObject *stamp = SLOT(node, n_stamp), *inputs = SLOT(node, n_inputs);
        if (stamp == NULL || inputs == NULL || !PyLong_CheckExact(stamp) || !PyTuple_CheckExact(inputs)) goto python;
        long long made = PyLong_AsLongLong(stamp);
        if (made == -1 && PyErr_Occurred()) goto fail;
        if (made < last) goto python; /* a view's history may be made again: the Python walk sees to it */
        for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(inputs); i < n; i++) {
            PyObject *x = PyTuple_GET_ITEM(inputs, i), *rg;
            if (!PyObject_TypeCheck(x, tensor_type) || (rg = SLOT(x, t_rg)) == NULL || !PyBool_Check(rg))
                goto python;
            if (rg == Py_False) continue;
            if ((r = walk_seen(seen, x)) < 0) goto fail;
            if (!r && walk_push(&stack, &top, &cap, x, 0)) goto fail;
        }
    }
    PyMem_Free(stack);
    Py_DECREF(seen);
    return order;
python:
    PyMem_Free(stack);
    Py_DECREF(seen);
    Py_DECREF(order);
    Py_RETURN_NONE;
fail:
    PyMem_Free(stack);
    Py_XDECREF(seen);
    Py_XDECREF(order);
    return NULL;
}
