"""Optimizers whose updates are verigrad ops: SGD, Adam, AdamW, RMSprop, Adagrad; learning-rate
schedules in `lr_scheduler`."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import Adagrad, RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
