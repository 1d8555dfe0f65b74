"""What a compiled function reads besides its tensors, as the eager call reads it: random draws are made
at each call (the eager numbers, bit for bit; a trace draws nothing), and a changed Python value the trace
read (a module's training flag, a number in a closure or global, an optimizer setting) traces again."""

import numpy as np
import pytest

import verigrad as vg
import verigrad.nn as nn
import verigrad.nn.functional as F


def _eager_and_compiled(fn, *args, calls=4, seed=0):
    vg.manual_seed(seed)
    eager = [fn(*args) for _ in range(calls)]
    after_eager = vg.rand(3).numpy()
    compiled = vg.compile(fn)
    vg.manual_seed(seed)
    got = [compiled(*args) for _ in range(calls)]
    after_compiled = vg.rand(3).numpy()
    return eager, got, after_eager, after_compiled


def _bits(t):
    return np.asarray(t.numpy()).tobytes()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.dropout(x, 0.5, True),
        lambda x: x + vg.rand(*x.shape),
        lambda x: x * vg.randn_like(x) + vg.randint(0, 5, x.shape).float(),
        lambda x: F.dropout(F.dropout(x, 0.3, True), 0.6, True).sum(0),
    ],
    ids=["dropout", "rand", "randn_like+randint", "two_dropouts"],
)
def test_each_call_draws_as_eager(fn):
    x = vg.ones(6, 5)
    eager, compiled, after_eager, after_compiled = _eager_and_compiled(fn, x, calls=12)
    assert [_bits(t) for t in compiled] == [_bits(t) for t in eager]
    assert len({_bits(t) for t in compiled}) > 1  # not one draw repeated
    assert after_compiled.tobytes() == after_eager.tobytes()  # the generator moved as far


def test_generator_argument_is_drawn_per_call():
    g_eager, g_compiled = vg.Generator(5), vg.Generator(5)
    x = vg.ones(8)
    eager = [F.dropout(x, 0.5, True, generator=g_eager) for _ in range(6)]
    step = vg.compile(lambda x: F.dropout(x, 0.5, True, generator=g_compiled))
    got = [step(x) for _ in range(6)]
    assert [_bits(t) for t in got] == [_bits(t) for t in eager]


def test_training_step_with_dropout_matches_eager():
    def make():
        vg.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
        return model, vg.optim.SGD(model.parameters(), lr=0.1)

    x, y = vg.randn(8, 4), vg.tensor([0, 1, 2, 0, 1, 2, 0, 1])

    def step(model, opt):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    model, opt = make()
    vg.manual_seed(7)
    eager = [step(model, opt).item() for _ in range(20)]
    model2, opt2 = make()
    compiled = vg.compile(lambda: step(model2, opt2))
    vg.manual_seed(7)
    got = [compiled().item() for _ in range(20)]
    assert got == eager
    for a, b in zip(model.parameters(), model2.parameters()):
        assert _bits(a) == _bits(b)


def test_check_and_trace_draw_nothing():
    vg.manual_seed(3)
    expected = vg.rand(4).numpy()
    vg.manual_seed(3)
    vg.check(lambda x: F.dropout(x, 0.5, True), vg.spec([5]))
    vg.trace(lambda x: x + vg.rand(5), vg.spec([5]))
    assert vg.rand(4).numpy().tobytes() == expected.tobytes()


# Python values a trace reads ------------------------------------------------------------------------
@vg.no_grad()
def test_eval_after_compile_runs_eval_mode():
    vg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    x = vg.randn(8, 4)
    f = vg.compile(lambda x: model(x))
    f(x)
    model.eval()
    assert _bits(f(x)) == _bits(model(x))  # BatchNorm's running stats, no dropout
    model.train()
    vg.manual_seed(4)
    eager = model(x)
    vg.manual_seed(4)
    assert _bits(f(x)) == _bits(eager)
    assert f.counts["traces"] == 2  # training and eval: each traced once


def test_results_that_need_history_carry_it():
    vg.manual_seed(0)
    model = nn.Linear(4, 3)
    x = vg.randn(5, 4)
    f = vg.compile(lambda x: model(x))
    with vg.no_grad():
        plain = f(x)  # a plan's result, no history
    assert not plain.requires_grad
    out = f(x)  # grad on: the result carries history, so backward() outside reaches the weights
    out.sum().backward()
    assert _bits(out.detach()) == _bits(plain)
    assert model.weight.grad.tolist() == [x.sum(0).tolist()] * 3


SCALE = 2.0


def test_changed_closure_and_global_numbers_trace_again():
    x = vg.arange(4.0)
    k = 3
    f = vg.compile(lambda x: x * k + SCALE)
    assert f(x).tolist() == [2.0, 5.0, 8.0, 11.0]
    k = 1
    assert f(x).tolist() == [2.0, 3.0, 4.0, 5.0]
    global SCALE
    SCALE = 0.5
    try:
        assert f(x).tolist() == [0.5, 1.5, 2.5, 3.5]
    finally:
        SCALE = 2.0
    assert f(x).tolist() == [2.0, 3.0, 4.0, 5.0]
    assert f.counts["traces"] == 3  # k=1 with SCALE 2.0 was traced before


def test_values_that_keep_changing_run_eagerly_with_a_warning():
    x = vg.arange(3.0)
    step = 0
    f = vg.compile(lambda x: x + step)
    results = []
    with pytest.warns(UserWarning, match="runs eagerly"):
        for step in range(12):  # noqa: B007
            results.append(f(x).tolist())
    assert results == [[float(s), s + 1.0, s + 2.0] for s in range(12)]
    assert f.counts["traces"] == 8


@pytest.mark.parametrize("cycle_momentum", [False, True])
def test_changed_optimizer_settings_trace_again(cycle_momentum):
    def run(compiled):
        vg.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = vg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
        schedule = vg.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=0.5, total_steps=20, cycle_momentum=cycle_momentum
        )
        x, y = vg.randn(8, 4), vg.randn(8, 2)

        def step():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run_step = vg.compile(step) if compiled else step
        losses = []
        for i in range(15):
            losses.append(run_step().item())
            schedule.step()
            if i == 7:
                opt.param_groups[0]["weight_decay"] = 0.5  # not mirrored in a tensor: traced again
        return losses, run_step

    eager, _ = run(False)
    compiled, step = run(True)
    assert compiled == eager
    assert step.counts["traces"] == 2  # the schedule's lr and momentum alone do not trace again


def test_hooks_added_or_removed_after_compiling_trace_again():
    layer, x = nn.Linear(3, 3), vg.ones(2, 3)
    f = vg.compile(lambda x: layer(x))
    plain = f(x)
    handle = layer.register_forward_hook(lambda module, args, out: out * 0)
    assert f(x).tolist() == [[0.0] * 3] * 2
    handle.remove()
    assert _bits(f(x)) == _bits(plain)


def test_a_generator_made_inside_the_function_gives_its_numbers_at_every_call():
    def f(x):
        return x + vg.rand(3, generator=vg.Generator(7)) + vg.rand(3)

    x = vg.zeros(3)
    vg.manual_seed(2)
    eager = [_bits(f(x)) for _ in range(4)]
    compiled = vg.compile(f)
    vg.manual_seed(2)
    assert [_bits(compiled(x)) for _ in range(4)] == eager
