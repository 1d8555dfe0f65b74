"""Loss layers, as PyTorch's: each takes PyTorch's arguments in its order (the deprecated size_average
and reduce too, mapped to a reduction as PyTorch maps them) and calls its F loss with them; a class
weight (and BCEWithLogitsLoss's pos_weight) is a buffer, as in PyTorch."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from ..tensor import Tensor
from . import functional as F
from .distance import PairwiseDistance
from .functional.losses import checked_reduction
from .module import Module

_P = inspect.Parameter


def _params(spec: str) -> list[inspect.Parameter]:
    """Parameters from "name=default, ..." ("*" starts keyword-only ones); defaults are Python literals."""
    out, kind = [], _P.POSITIONAL_OR_KEYWORD
    for item in (part.strip() for part in spec.split(",") if part.strip()):
        if item == "*":
            kind = _P.KEYWORD_ONLY
            continue
        name, _, default = item.partition("=")
        out.append(_P(name, kind, default=ast.literal_eval(default) if default else _P.empty))
    return out


class _Loss(Module):
    """A loss module: forward(*inputs) is F.<loss>(*inputs, **settings, reduction=...)."""

    loss: Callable[..., Tensor]
    buffers_: tuple[str, ...] = ()  # settings held as buffers (class weights)
    reduction: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = self.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
        bound.apply_defaults()
        settings = dict(bound.arguments)
        name = type(self).__name__
        size_average, reduce = settings.pop("size_average", None), settings.pop("reduce", None)
        extra = ("batchmean",) if name == "KLDivLoss" else ()
        reduction = checked_reduction(name, settings.pop("reduction"), size_average, reduce, also=extra)
        super().__init__()
        self.reduction = reduction
        for key, value in settings.items():
            if key in self.buffers_:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"{name}: {key} must be a tensor or None, got {type(value).__name__}")
                self.register_buffer(key, value)
            else:
                setattr(self, key, value)
        object.__setattr__(self, "_settings", tuple(settings))

    def forward(self, *inputs: Any) -> Tensor:
        settings = {key: getattr(self, key) for key in self._settings}
        return type(self).loss(*inputs, **settings, reduction=self.reduction)


# PyTorch's torch.nn.modules.loss._Loss(size_average, reduce, reduction): a user's loss subclasses it
_Loss.__signature__ = inspect.Signature(_params("size_average=None, reduce=None, reduction='mean'"))  # type: ignore[attr-defined]


class _WeightedLoss(_Loss):
    """PyTorch's torch.nn.modules.loss._WeightedLoss: a _Loss holding class weights as the buffer `weight`."""

    buffers_ = ("weight",)
    __signature__ = inspect.Signature(
        _params("weight=None, size_average=None, reduce=None, reduction='mean'")
    )


def _loss_module(name: str, fn: Callable[..., Tensor], spec: str, inputs: str, doc: str) -> type[_Loss]:
    """A loss module of F's `fn` whose constructor takes PyTorch's `spec` and whose forward takes
    `inputs` (their names, PyTorch's)."""
    init = inspect.Signature(_params(spec))
    forward_sig = inspect.Signature([_P("self", _P.POSITIONAL_OR_KEYWORD), *_params(inputs)])

    def forward(self: _Loss, *args: Any, **kwargs: Any) -> Tensor:
        bound = forward_sig.bind(self, *args, **kwargs)
        return _Loss.forward(self, *list(bound.arguments.values())[1:])

    forward.__signature__ = forward_sig  # type: ignore[attr-defined]
    buffers = tuple(k for k in ("weight", "pos_weight") if k in init.parameters)
    cls = type(
        name,
        (_Loss,),
        {
            "loss": staticmethod(fn),
            "__signature__": init,
            "__doc__": doc,
            "buffers_": buffers,
            "forward": forward,
            "__module__": __name__,
        },
    )
    return cls


_LEGACY = "size_average=None, reduce=None, reduction='mean'"

L1Loss = _loss_module("L1Loss", F.l1_loss, _LEGACY, "input, target", "|input - target| (see F.l1_loss).")
MSELoss = _loss_module(
    "MSELoss", F.mse_loss, _LEGACY, "input, target", "(input - target)^2 (see F.mse_loss)."
)
CrossEntropyLoss = _loss_module(
    "CrossEntropyLoss",
    F.cross_entropy,
    "weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', label_smoothing=0.0",
    "input, target",
    "Cross-entropy of logits against class indices or probabilities (see F.cross_entropy).",
)
NLLLoss = _loss_module(
    "NLLLoss",
    F.nll_loss,
    "weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean'",
    "input, target",
    "Negative log-likelihood of log-probabilities at class indices (see F.nll_loss).",
)
BCELoss = _loss_module(
    "BCELoss",
    F.binary_cross_entropy,
    "weight=None, " + _LEGACY,
    "input, target",
    "Binary cross-entropy of probabilities (see F.binary_cross_entropy).",
)
BCEWithLogitsLoss = _loss_module(
    "BCEWithLogitsLoss",
    F.binary_cross_entropy_with_logits,
    "weight=None, " + _LEGACY + ", pos_weight=None",
    "input, target",
    "Binary cross-entropy of sigmoid(logits), from the logits (see F.binary_cross_entropy_with_logits).",
)
KLDivLoss = _loss_module(
    "KLDivLoss",
    F.kl_div,
    _LEGACY + ", log_target=False",
    "input, target",
    "The Kullback-Leibler divergence of log-probabilities from a target (see F.kl_div).",
)
SmoothL1Loss = _loss_module(
    "SmoothL1Loss", F.smooth_l1_loss, _LEGACY + ", beta=1.0", "input, target", "See F.smooth_l1_loss."
)
HuberLoss = _loss_module(
    "HuberLoss", F.huber_loss, "reduction='mean', delta=1.0", "input, target", "See F.huber_loss."
)
SoftMarginLoss = _loss_module(
    "SoftMarginLoss", F.soft_margin_loss, _LEGACY, "input, target", "See F.soft_margin_loss."
)
MultiLabelMarginLoss = _loss_module(
    "MultiLabelMarginLoss",
    F.multilabel_margin_loss,
    _LEGACY,
    "input, target",
    "See F.multilabel_margin_loss.",
)
MultiLabelSoftMarginLoss = _loss_module(
    "MultiLabelSoftMarginLoss",
    F.multilabel_soft_margin_loss,
    "weight=None, " + _LEGACY,
    "input, target",
    "See F.multilabel_soft_margin_loss.",
)
MarginRankingLoss = _loss_module(
    "MarginRankingLoss",
    F.margin_ranking_loss,
    "margin=0.0, " + _LEGACY,
    "input1, input2, target",
    "See F.margin_ranking_loss.",
)
HingeEmbeddingLoss = _loss_module(
    "HingeEmbeddingLoss",
    F.hinge_embedding_loss,
    "margin=1.0, " + _LEGACY,
    "input, target",
    "See F.hinge_embedding_loss.",
)
CosineEmbeddingLoss = _loss_module(
    "CosineEmbeddingLoss",
    F.cosine_embedding_loss,
    "margin=0.0, " + _LEGACY,
    "input1, input2, target",
    "See F.cosine_embedding_loss.",
)
MultiMarginLoss = _loss_module(
    "MultiMarginLoss",
    F.multi_margin_loss,
    "p=1, margin=1.0, weight=None, " + _LEGACY,
    "input, target",
    "See F.multi_margin_loss.",
)
TripletMarginLoss = _loss_module(
    "TripletMarginLoss",
    F.triplet_margin_loss,
    "margin=1.0, p=2.0, eps=1e-06, swap=False, " + _LEGACY,
    "anchor, positive, negative",
    "See F.triplet_margin_loss.",
)
_TripletMarginWithDistanceLoss = _loss_module(
    "TripletMarginWithDistanceLoss",
    F.triplet_margin_with_distance_loss,
    "*, distance_function=None, margin=1.0, swap=False, reduction='mean'",
    "anchor, positive, negative",
    "See F.triplet_margin_with_distance_loss.",
)


class TripletMarginWithDistanceLoss(_TripletMarginWithDistanceLoss):  # type: ignore[misc,valid-type]
    """See F.triplet_margin_with_distance_loss; no distance_function is a PairwiseDistance() submodule,
    as PyTorch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.distance_function is None:
            self.distance_function = PairwiseDistance()


PoissonNLLLoss = _loss_module(
    "PoissonNLLLoss",
    F.poisson_nll_loss,
    "log_input=True, full=False, size_average=None, eps=1e-08, reduce=None, reduction='mean'",
    "log_input, target",
    "See F.poisson_nll_loss.",
)
GaussianNLLLoss = _loss_module(
    "GaussianNLLLoss",
    F.gaussian_nll_loss,
    "*, full=False, eps=1e-06, reduction='mean'",
    "input, target, var",
    "See F.gaussian_nll_loss.",
)
CTCLoss = _loss_module(
    "CTCLoss",
    F.ctc_loss,
    "blank=0, reduction='mean', zero_infinity=False",
    "log_probs, targets, input_lengths, target_lengths",
    "The CTC loss (see F.ctc_loss).",
)
