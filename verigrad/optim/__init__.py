"""Optimizers whose updates are verigrad ops: SGD, Adam, AdamW, Adamax, NAdam, RAdam, RMSprop, Adagrad;
learning-rate schedules in `lr_scheduler`."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import Adagrad, RMSprop
from .sgd import SGD

__all__ = [
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "lr_scheduler",
]
