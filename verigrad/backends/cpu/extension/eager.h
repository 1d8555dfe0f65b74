/* What the vg_eager extension's files share: eager_support.c (what the eager call reads: slot offsets,
 * cached attributes, scalars, the plan key's params), vg_eager.c (the module, its setup and the eager call
 * of an op: `call_op`), eager_fast.c (the direct kernel calls of the call's fast paths: element-wise, rows,
 * reductions, matmul, views, concatenation), eager_method.c (the Method descriptor: Tensor's methods and
 * operators calling an op) and backward.c (the backward engine's walk). They are compiled as one
 * translation unit, this file first (fastcall.EAGER_SOURCES, whose joined text the build's hash covers):
 * the module's state, which `setup` and the module's init set and every file reads, and the functions a
 * file calls from a later one are declared here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

#define MAX_OPERANDS 8
#define MAX_JOINED 16 /* the most arrays a concatenation gives the pool (more: copied on the caller) */
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
static PyObject *dtype_f32, *dtype_f64, *conform_fn; /* DTypes f32 and f64; eager.py's conform */
static PyObject *S_stack, *S_grad, *S_plans, *S_variadic, *S_positional, *S_canonical, *S_decompose,
    *S_group, *S_differentiable, *S_vjp, *S_reference, *S_shape, *S_dtype, *S_kind, *S_np, *S_threads, *S_first,
    *S_stamp, *S_plan, *S_run, *S_axes, *S_index, *S_axis, *S_clock, *S_keepdim, *S_size, *S_explicit, *S_seen,
    *S_direct, *S_strides, *S_fast, *S_input, *S_tensors, *S_out, *S_reshape;
static PyObject *names_shape, *names_axis, *names_axes, *minus_one; /* ("shape",), ("axis",), ("axes",), -1 */
static PyObject *S_copy_kw; /* ("copy",) */
static PyObject *call_backend = NULL; /* the backend of the call `direct` makes (borrowed; read under the GIL) */
static int ready = 0;

#define SLOT(o, at) (*(PyObject **)((char *)(o) + (at)))
static char not_handled; /* a sentinel, never handed to Python */
#define NOT_HANDLED ((PyObject *)&not_handled)

/* the NumPy type number of DType `d` where it is f32 or f64, else -1 */
static inline int float_typenum(PyObject *d) {
    return d == dtype_f32 ? NPY_FLOAT32 : d == dtype_f64 ? NPY_FLOAT64 : -1;
}

/* eager_fast.c: a kernel called directly where its plan says `fast`; the settings those calls read */
static PyObject *direct(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params);
static PyObject *readers(PyObject *module, PyObject *args);
static PyObject *read_settings(PyObject *module, PyObject *args);
/* eager_copies.c: a reshape that copies, a concatenation */
static PyObject *reshape_copied(PyObject *fast, PyArrayObject *x, PyObject *shape, PyArray_Dims *dims);
static PyObject *concatenated(PyObject *fast, PyObject **arrays, Py_ssize_t n, PyObject *params);
/* eager_method.c: the Method type */
static PyTypeObject MethodType;
/* backward.c */
static PyObject *topological(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
