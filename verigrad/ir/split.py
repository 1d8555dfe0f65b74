"""A joint program (a forward, then `backward:` its VJPs for the results' gradients) split into a forward
program and a backward program, as torch.compile's AOT autograd partitions a graph: the forward returns
the results and the values the backward reads (residuals); the backward takes the arguments, the
results' gradients and the residuals, and returns the gradients. So a compiled call whose results a
backward() outside differentiates runs each half once, keeping what eager autograd keeps."""

from __future__ import annotations

from .program import Instr, Program, Value


def split(joint: Program, n_args: int, n_cotangents: int, n_results: int) -> tuple[Program, Program] | None:
    """(forward, backward) of `joint`, whose inputs are the arguments (`n_args`), the results'
    gradients (`n_cotangents`), then the captured tensors, and whose outputs are the `n_results`
    results then the gradients. None where the halves do not separate (a random draw or a cotangent
    read before `backward:`)."""
    at = joint.backward_at if joint.backward_at is not None else len(joint.instrs)
    forward_instrs, backward_instrs = joint.instrs[:at], joint.instrs[at:]
    args = joint.inputs[:n_args]
    cotangents = joint.inputs[n_args : n_args + n_cotangents]
    captured = joint.inputs[n_args + n_cotangents :]
    cotangent_ids = {v.id for v in cotangents}
    if any(a.id in cotangent_ids for i in forward_instrs for a in i.args):
        return None
    if any("seed" in i.params for i in backward_instrs):
        return None
    results, gradients = joint.outputs[:n_results], joint.outputs[n_results:]
    made_before = {i.out.id for i in forward_instrs}
    residuals: dict[int, Value] = {}
    for v in [a for i in backward_instrs for a in i.args] + list(gradients):
        if v.id in made_before and v.id not in residuals:
            residuals[v.id] = v
    forward = joint.copy(
        instrs=list(forward_instrs),
        inputs=[*args, *captured],
        outputs=[*results, *residuals.values()],
        backward_at=None,
        n_args=n_args,
    )
    # the backward reads each residual as an input of its own (a new value: the forward's stays as it is)
    renamed: dict[int, Value] = {}
    next_id = joint._next
    for k, v in enumerate(residuals.values()):
        renamed[v.id] = Value(next_id, v.spec, f"saved{k}")
        next_id += 1

    def _read(v: Value) -> Value:
        return renamed.get(v.id, v)

    backward = joint.copy(
        instrs=[Instr(i.op, tuple([_read(a) for a in i.args]), i.params, i.out) for i in backward_instrs],
        inputs=[*args, *cotangents, *renamed.values(), *captured],
        outputs=[_read(g) for g in gradients],
        updates={},
        backward_at=None,
        n_args=n_args + n_cotangents + len(renamed),
        draws=[],
        guards={},
        _next=next_id,
    )
    return forward, backward
