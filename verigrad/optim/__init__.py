"""Optimizers whose updates are verigrad ops: SGD, Adam, AdamW; learning-rate schedules in
`lr_scheduler`."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "lr_scheduler"]
