"""Composite ops: defined by decompositions into primitives (their reference), some with own VJPs."""

from .attention import attention, attention_grad, attention_lse, cached_attention
from .attention_q8 import cached_attention_q8
from .attention_ragged import ragged_attention, ragged_attention_q8
from .convolution import col2im, conv2d, im2col
from .dropout import dropout
from .embedding import embedding
from .losses import binary_cross_entropy, cross_entropy, cross_entropy_step, cross_entropy_total
from .normalization import layer_norm, rms_norm
from .pooling import avg_pool2d, max_pool2d, max_pool_grad_at
from .rope import rope
from .softmax import log_softmax, softmax, softmax_grad
