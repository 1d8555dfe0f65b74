"""Program -> Program transformations, each in a module of its own; `PIPELINE` is their order."""

from . import dce

PIPELINE = [dce.run]


def optimize(program, passes=None):
    """Run the passes in order (the default pipeline when None)."""
    for run in PIPELINE if passes is None else passes:
        program = run(program)
    return program
