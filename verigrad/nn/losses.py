"""Loss layers, as PyTorch's: each calls its F loss with the reduction and settings it was made with."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .functional.losses import REDUCTIONS
from .module import Module


def _checked(reduction: str) -> str:
    """`reduction`, refused when made rather than at the first call if it is not one F's losses take."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    return reduction


class _Loss(Module):
    """A loss module: F.<name>(input, target, reduction=..., **settings)."""

    def __init__(self, reduction: str = "mean", **settings: Any):
        super().__init__()
        self.reduction, self.settings = _checked(reduction), settings

    def forward(self, *inputs: Tensor) -> Tensor:
        return self.loss(*inputs, reduction=self.reduction, **self.settings)

    def extra_repr(self) -> str:
        return ", ".join([f"reduction={self.reduction!r}"] + [f"{k}={v!r}" for k, v in self.settings.items()])


class CrossEntropyLoss(Module):
    """Cross-entropy of logits [N, C] against integer targets [N] (see F.cross_entropy)."""

    def __init__(
        self,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        weight: Tensor | None = None,
        ignore_index: int | None = None,
    ):
        super().__init__()
        self.reduction, self.label_smoothing = reduction, label_smoothing
        self.class_weight, self.ignore_index = weight, ignore_index

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            logits,
            target,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            weight=self.class_weight,
            ignore_index=self.ignore_index,
        )


class MSELoss(_Loss):
    """Squared differences."""

    loss = staticmethod(F.mse_loss)


class L1Loss(_Loss):
    """Absolute differences."""

    loss = staticmethod(F.l1_loss)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction, beta=beta)

    loss = staticmethod(F.smooth_l1_loss)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction, delta=delta)

    loss = staticmethod(F.huber_loss)


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities [N, C] at integer classes [N]."""

    def __init__(self, reduction: str = "mean", ignore_index: int = -100):
        super().__init__(reduction, ignore_index=ignore_index)

    loss = staticmethod(F.nll_loss)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities."""

    loss = staticmethod(F.binary_cross_entropy)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(logits), from the logits."""

    loss = staticmethod(F.binary_cross_entropy_with_logits)


def _loss_module(name: str, fn: Any, doc: str, **defaults: Any) -> type[_Loss]:
    """A loss module of F's `fn`, whose settings (and their defaults) are `defaults`, as PyTorch's."""

    def __init__(self: _Loss, *args: Any, reduction: str = "mean", **settings: Any) -> None:
        if len(args) > len(defaults):
            raise TypeError(f"{name} takes at most {len(defaults)} positional settings")
        unknown = set(settings) - set(defaults)
        if unknown:
            raise TypeError(f"{name} has no setting {sorted(unknown)[0]!r}; it has {', '.join(defaults)}")
        values = dict(defaults) | dict(zip(defaults, args)) | settings
        _Loss.__init__(self, reduction, **values)

    return type(name, (_Loss,), {"loss": staticmethod(fn), "__init__": __init__, "__doc__": doc})


MarginRankingLoss = _loss_module(
    "MarginRankingLoss", F.margin_ranking_loss, "See F.margin_ranking_loss.", margin=0.0
)


HingeEmbeddingLoss = _loss_module(
    "HingeEmbeddingLoss", F.hinge_embedding_loss, "See F.hinge_embedding_loss.", margin=1.0
)


SoftMarginLoss = _loss_module("SoftMarginLoss", F.soft_margin_loss, "See F.soft_margin_loss.")


CosineEmbeddingLoss = _loss_module(
    "CosineEmbeddingLoss", F.cosine_embedding_loss, "See F.cosine_embedding_loss.", margin=0.0
)


MultiMarginLoss = _loss_module(
    "MultiMarginLoss", F.multi_margin_loss, "See F.multi_margin_loss.", p=1, margin=1.0, weight=None
)


TripletMarginLoss = _loss_module(
    "TripletMarginLoss",
    F.triplet_margin_loss,
    "See F.triplet_margin_loss.",
    margin=1.0,
    p=2.0,
    eps=1e-6,
    swap=False,
)


PoissonNLLLoss = _loss_module(
    "PoissonNLLLoss", F.poisson_nll_loss, "See F.poisson_nll_loss.", log_input=True, full=False, eps=1e-8
)


GaussianNLLLoss = _loss_module(
    "GaussianNLLLoss", F.gaussian_nll_loss, "See F.gaussian_nll_loss.", full=False, eps=1e-6
)


class CTCLoss(Module):
    """The CTC loss (see F.ctc_loss): forward(log_probs, targets, input_lengths, target_lengths)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, _checked(reduction), zero_infinity

    def forward(self, log_probs: Tensor, targets: Any, input_lengths: Any, target_lengths: Any) -> Tensor:
        settings = {"blank": self.blank, "reduction": self.reduction, "zero_infinity": self.zero_infinity}
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, **settings)
