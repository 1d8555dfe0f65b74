"""Optimizers whose updates are verigrad ops: SGD, Adam, AdamW."""

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
