"""The training step the tests compile and run eagerly: the one `verigrad train` runs."""

from verigrad.cli.trainer import training_step

__all__ = ["training_step"]
