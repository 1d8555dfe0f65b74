"""The geometry array of the sliding-window kernels (window.h), which convolution_im2col.c (im2col,
col2im) and pooling.c (the pools) read: an image's sizes and strides, the window's params and a second
operand's strides; and the operands those kernels take as they are."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops.composite.convolution import out_hw

GEO = ctypes.c_int64 * 25  # window.h's G_LEN
TAIL = [ctypes.c_int64, ctypes.c_int]  # min_chunk, threads


def elements(a: np.ndarray) -> list[int]:
    """The strides of `a` in elements (0 along a size-1 axis)."""
    return [0 if n == 1 else s // a.itemsize for n, s in zip(a.shape, a.strides)]


def usable(a: np.ndarray) -> np.ndarray:
    """`a` itself when it is aligned with whole-element strides, else a contiguous copy. (Its dtype is
    the kernel's: every window op's result has its operands' dtype.)"""
    if a.flags.carray:  # C-contiguous and aligned: whole-element strides (the usual case, checked first)
        return a
    if not a.flags.aligned or any(s % a.itemsize for s in a.strides):
        a = np.ascontiguousarray(a)
    return a


def logical(strides: list[int], layout: str) -> list[int]:
    """Image strides in the order (n, c, h, w)."""
    return strides if layout == "NCHW" else [strides[0], strides[3], strides[1], strides[2]]


def geometry(
    x_shape: tuple, layout: str, kernel, stride, padding, dilation, x_strides, y_strides=()
) -> tuple[Any, tuple[int, int, int, int]]:
    """window.h's geometry array, and (n, c, ho, wo)."""
    n, c, h, w = x_shape if layout == "NCHW" else (x_shape[0], x_shape[3], x_shape[1], x_shape[2])
    ho, wo = out_hw(h, w, kernel, stride, padding, dilation)
    values = [n, c, h, w, *kernel, *stride, *padding, *dilation, ho, wo, int(layout == "NHWC")]
    values += [*x_strides, *y_strides]
    return GEO(*values), (n, c, ho, wo)
