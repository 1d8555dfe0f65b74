"""Every op, one record each. `REGISTRY` maps names to ops; the test suites iterate over it."""

from ..registry import OPS as REGISTRY
from ._op import Op, Sample, unbroadcast
from .binary import (
    add,
    div,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_not,
    logical_or,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    sub,
    where,
)
from .composite import (
    attention,
    avg_pool2d,
    cached_attention,
    col2im,
    conv2d,
    cross_entropy,
    dropout,
    embedding,
    im2col,
    layer_norm,
    log_softmax,
    max_pool2d,
    rms_norm,
    rope,
    softmax,
)
from .creation import (
    Generator,
    arange,
    eye,
    from_dlpack,
    from_numpy,
    full,
    manual_seed,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .derived import (
    all,
    any,
    argmin,
    chunk,
    clamp,
    flip,
    index_select,
    isfinite,
    isinf,
    isnan,
    logsumexp,
    masked_fill,
    repeat,
    sort,
    split,
    std,
    topk,
    tril,
    triu,
    var,
)
from .einsum import einsum
from .index import argsort, gather, gather_grad, take, take_grad
from .matmul import matmul
from .movement import broadcast_to, cast, concat, contiguous, pad, permute, reshape, slice_, unslice
from .quant import dequantize_op, qembedding, qmatmul, qmatmul_q8
from .reduce import argmax, max, mean, min, numel_of, sum
from .scan import cumsum
from .shaping import assign, expand, flatten, getitem, squeeze, stack, transpose, unsqueeze
from .unary import (
    abs,
    cos,
    exp,
    expm1,
    gelu,
    gelu_deriv,
    gelu_tanh,
    gelu_tanh_deriv,
    log,
    log1p,
    neg,
    relu,
    relu_deriv,
    rsqrt,
    sigmoid,
    sigmoid_deriv,
    silu,
    silu_deriv,
    sin,
    sqrt,
    tanh,
    tanh_deriv,
)
