"""Integer convolutions as PyTorch's CPU kernels compute them: products and sums in the input's dtype,
wrapping (exact in any order), for the integer dtypes PyTorch convolves (u8, i8, i16, i32, i64); and the
dtype rules PyTorch's convolutions hold their input, weight and bias to."""

from __future__ import annotations

from collections.abc import Sequence

from ...dtypes import INTEGERS, bf16, i64
from ...errors import DTypeError
from ...ops.composite._common import window_out
from ...tensor import Tensor
from .pooling_windows import regular_axis, zero_padded_windows

_AXES = ("depth", "height", "width")


def refuse_bf16(x: Tensor, what: str) -> None:
    """bf16 convolutions raise: PyTorch's CPU kernels sum in f32 in an order of their own, so that about one
    element in 5000 of a wide reduction (256 channels of 3x3) is a bf16 step from the once-rounded result,
    which is what verigrad could compute; no result here is better than one with other bits."""
    if x.dtype is bf16:
        raise DTypeError(
            f"{what} of bf16: not supported (PyTorch's CPU kernel rounds its f32 sums in an order verigrad "
            f"does not reproduce, a bf16 step apart on some elements); convolve in f32 and round: "
            f"{what}(x.float(), weight.float(), ...).bfloat16()"
        )


def check_dtypes(x: Tensor, weight: Tensor, bias: Tensor | None, what: str) -> None:
    """PyTorch's rule for conv1d/2d/3d: the input, the weight and the bias share one dtype, a float one
    or one of PyTorch's integer ones (no bool); bf16 raises (refuse_bf16)."""
    refuse_bf16(x, what)
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"{what}: the input is {x.dtype.name} and the weight {weight.dtype.name}; they must have the "
            f"same dtype (as PyTorch: 'expected scalar type'), cast one first"
        )
    if bias is not None and bias.dtype is not x.dtype:
        raise DTypeError(
            f"{what}: the input is {x.dtype.name} and the bias {bias.dtype.name}; they must have the same "
            f"dtype (as PyTorch), cast the bias first"
        )
    if not x.dtype.is_float and x.dtype not in INTEGERS:
        allowed = ", ".join(d.name for d in INTEGERS)
        raise DTypeError(f"{what} of {x.dtype.name}: PyTorch convolves floats and {allowed} only")


def check_transposed_dtypes(x: Tensor, weight: Tensor, bias: Tensor | None, what: str) -> None:
    """PyTorch's rule for conv_transpose1d/2d/3d: the weight in the input's dtype; the bias too for 3-D
    and for f16/bf16 inputs, else any dtype the result (in the input's dtype) can take (no float bias
    on an integer input); bf16 raises (refuse_bf16)."""
    refuse_bf16(x, what)
    if weight.dtype is not x.dtype:
        raise DTypeError(
            f"{what}: the input is {x.dtype.name} and the weight {weight.dtype.name}; they must have the "
            f"same dtype (as PyTorch: 'expected scalar type'), cast one first"
        )
    if bias is None or bias.dtype is x.dtype:
        return
    if (
        what == "conv_transpose3d"
        or x.dtype.name in ("f16", "bf16")
        or (bias.dtype.is_float and not x.dtype.is_float)
    ):
        raise DTypeError(
            f"{what}: the input is {x.dtype.name} and the bias {bias.dtype.name}; PyTorch refuses this "
            f"bias, cast it to {x.dtype.name} first"
        )


def conv_nd(
    x: Tensor,
    weight: Tensor,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    what: str,
) -> Tensor:
    """The convolution of integer x [N, C, *spatial] with weight [O, C, *kernel] (groups=1, numeric
    padding with zeros): every window gathered, [N, Out, C * K], times the weight [O, C * K] transposed,
    in x's dtype with wrapping sums as PyTorch's integer kernel. Dilated, i64 only (PyTorch's)."""
    if x.dtype is not i64 and any(d != 1 for d in dilation):
        raise DTypeError(
            f"{what} of {x.dtype.name} with dilation {tuple(dilation)}: PyTorch's dilated convolution "
            f"takes floats and i64 only"
        )
    nd = x.ndim - 2
    names = _AXES[3 - nd :]
    axes = []
    for i, (n, k) in enumerate(zip(x.shape[2:], weight.shape[2:])):
        out = window_out(n, k, stride[i], padding[i], dilation[i], names[i])
        axes.append(regular_axis(n, out, k, stride[i], padding[i], dilation[i]))
    windows = zero_padded_windows(x, axes)  # [N, C, Out, K], K row-major over the kernel's axes
    batch, channels, places, slots = windows.shape
    filters = weight.shape[0]
    cols = windows.permute(0, 2, 1, 3).reshape(batch, places, channels * slots)
    out = cols @ weight.reshape(filters, channels * slots).T  # [N, Out, O]
    return out.permute(0, 2, 1).reshape(batch, filters, *(a.shape[0] for a in axes))
