/* NumPy's own f64 inner loops of exp, expm1, log, log1p, sin, cos (d->d) and power (dd->d), handed over
 * by Python (numpy_loops.py reads them from the ufuncs), how to run one over a block, and each formula
 * on one value with its routine (vg_math.h's <op>_arg and <op>_rest around the loop).
 * Included by elementwise.c and by the fused kernels' generated libraries, each with tables of its own.
 */
#ifndef VG_NUMPY_H
#define VG_NUMPY_H
#include <stddef.h>
#include <stdint.h>

#include "vg_math.h"

typedef void (*np_loop)(char **args, const intptr_t *dims, const intptr_t *steps, void *data);
enum { NP_exp, NP_expm1, NP_log, NP_log1p, NP_sin, NP_cos, NP_power, NP_ROUTINES }; /* numpy_loops.ROUTINES */
static np_loop np_loops[NP_ROUTINES];
static void *np_data[NP_ROUTINES];
static int numpy_routines = 0; /* all of them handed over */

/* Take NumPy's loop `which` (NP_exp ..); whether all of them are now there. */
static int np_use(int which, void *loop, void *data) {
    if (which >= 0 && which < NP_ROUTINES) np_loops[which] = (np_loop)loop, np_data[which] = data;
    numpy_routines = 1;
    for (int i = 0; i < NP_ROUTINES; i++) numpy_routines &= np_loops[i] != NULL;
    return numpy_routines;
}

/* y[0..n) = NumPy's routine `which` of x[0..n) (and of b[0..n) for power), unit strides */
static inline void np_run(int which, const double *x, const double *b, double *y, int64_t n) {
    const intptr_t m = n, steps[3] = {sizeof(double), sizeof(double), sizeof(double)};
    char *unary[2] = {(char *)x, (char *)y}, *binary[3] = {(char *)x, (char *)b, (char *)y};
    np_loops[which](b ? binary : unary, &m, steps, np_data[which]);
}

/* <op> of one value with NumPy's routine (a fused kernel's member computed once per call) */
#define NP_ONE(NAME, ROUTINE)                                                                       \
    __attribute__((unused)) static double np_one_##NAME(double x) {                               \
        double a = NAME##_arg(x), r;                                                                \
        np_run(NP_##ROUTINE, &a, 0, &r, 1);                                                         \
        return NAME##_rest(x, r);                                                                   \
    }
VG_ROUTINE_OPS(NP_ONE)
__attribute__((unused)) static double np_one_pow(double a, double b) {
    double r;
    np_run(NP_power, &a, &b, &r, 1);
    return pow_rest(a, b, r);
}

#endif
