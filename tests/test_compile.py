"""verigrad.compile: one trace for every size, a plan per binding of the symbols (and per dtypes,
layouts and backend), compiled training steps bit-identical to eager ones on the reference backend,
and the symbolic contract enforced at each call with errors that name the argument and the symbol."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, ShapeError, dims, nn, spec
from verigrad.cli.demo import MLP, spirals
from verigrad.cli.trainer import training_step

B = dims("B")
H, W = dims("H W", multiple_of=4)


def _bits(t) -> bytes:
    return np.ascontiguousarray(t.numpy()).tobytes()


# models and steps -------------------------------------------------------------------------------------
def _cnn():
    return verigrad.models.digits_cnn()


def _mlp():
    return MLP.create(2, 16, 3)


def _data(model_name: str, rng: np.random.Generator, batch: int = 8):
    if model_name == "cnn":
        return rng.standard_normal((batch, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, batch)
    x, y = spirals(points_per_class=20, seed=int(rng.integers(100)))
    pick = rng.choice(len(x), batch, replace=False)
    return x[pick], y[pick]


OPTIMIZERS = {
    "sgd-momentum": lambda ps: verigrad.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "sgd-nesterov": lambda ps: verigrad.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda ps: verigrad.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: verigrad.optim.AdamW(ps, lr=1e-2),
}


def _setup(model_name: str, optimizer: str):
    verigrad.manual_seed(7)
    model = _cnn() if model_name == "cnn" else _mlp()
    opt = OPTIMIZERS[optimizer](model.parameters())
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, loss_fn, logits=True)

    return model, opt, step


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("model_name", ["cnn", "mlp"])
def test_compiled_training_step_is_bit_identical_to_eager(model_name, optimizer, rng):
    eager_model, eager_opt, eager_step = _setup(model_name, optimizer)
    model, opt, step = _setup(model_name, optimizer)
    compiled = verigrad.compile(step)
    for i in range(20):
        if i == 7:  # a learning-rate change between steps: the compiled step reads the new value
            eager_opt.lr = opt.lr = opt.lr * 0.3
        if i == 14:
            eager_opt.lr = opt.lr = 0.002
        x, y = _data(model_name, rng)
        loss_e, logits_e = eager_step(verigrad.tensor(x), verigrad.tensor(y))
        loss_c, logits_c = compiled(verigrad.tensor(x), verigrad.tensor(y))
        assert _bits(loss_c) == _bits(loss_e), f"step {i}: loss {float(loss_c)} vs {float(loss_e)}"
        assert _bits(logits_c) == _bits(logits_e), f"step {i}"
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert _bits(p) == _bits(q)
        assert q.grad is None  # gradients live inside the compiled call
    eager_state, state = eager_opt.state_dict(), opt.state_dict()
    assert opt.steps == eager_opt.steps == 20
    assert opt.param_steps == eager_opt.param_steps == [20] * len(opt.params)
    assert state["param_groups"] == eager_state["param_groups"]
    for key, value in eager_state["state"].items():
        assert all(_bits(state["state"][key][name]) == _bits(t) for name, t in value.items()), key
    assert compiled.stats() == {"traces": 1, "plans": 1, "hits": 19}


def test_a_compiled_step_continues_from_loaded_state(rng):
    """Loading a model's and an optimizer's state copies values into the tensors a compiled step
    captured, so resuming from a checkpoint goes on as it does eagerly."""
    eager_model, eager_opt, eager_step = _setup("mlp", "adam")
    model, opt, step = _setup("mlp", "adam")
    compiled = verigrad.compile(step)
    batches = [_data("mlp", rng) for _ in range(9)]
    snapshots = []
    for m, o, run in [(eager_model, eager_opt, eager_step), (model, opt, compiled)]:
        for x, y in batches[:3]:
            run(verigrad.tensor(x), verigrad.tensor(y))
        model_state = {k: verigrad.tensor(v) for k, v in vars(m).items()}
        snapshots.append((model_state, copy.deepcopy(o.state_dict())))  # its tensors are live, as PyTorch's
        for x, y in batches[3:6]:
            run(verigrad.tensor(x), verigrad.tensor(y))
        for k, v in model_state.items():
            with verigrad.no_grad():
                getattr(m, k).assign(v)
        o.load_state_dict(snapshots[-1][1])
        assert o.param_steps == [3] * len(o.params)
    for x, y in batches[6:]:
        assert _bits(compiled(x, y)[0]) == _bits(eager_step(verigrad.tensor(x), verigrad.tensor(y))[0])
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert _bits(p) == _bits(q)
    assert opt.param_steps == eager_opt.param_steps and compiled.stats()["traces"] == 1


def test_two_modules_with_the_same_parameter_names_are_both_updated(rng):
    def make():
        verigrad.manual_seed(5)
        enc, dec = nn.Linear(4, 4), nn.Linear(4, 2)
        opt = verigrad.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1, momentum=0.5)

        def step(x):
            loss = dec(enc(x).tanh()).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        return [*enc.parameters(), *dec.parameters()], step

    eager_params, eager_step = make()
    params, step = make()
    compiled = verigrad.compile(step)
    for _ in range(5):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        assert _bits(compiled(x)) == _bits(eager_step(verigrad.tensor(x)))
    for p, q in zip(eager_params, params):
        assert _bits(p) == _bits(q)
    names = [v.name for v in compiled.program(x).inputs[:5]]
    assert names == ["x", "enc.weight", "enc.bias", "dec.weight", "dec.bias"]


def test_demo_mlp_step_with_manual_updates_is_bit_identical():
    """The demo's own loop body (assign under no_grad, .grad = None), compiled and eager."""
    from verigrad.nn import functional as F

    x, y = (verigrad.tensor(a) for a in spirals(points_per_class=30))

    def make():
        verigrad.manual_seed(0)
        model = MLP.create(2, 32, 3)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            with verigrad.no_grad():
                for p in model.parameters():
                    p.assign(p - 1.0 * p.grad)
                    p.grad = None
            return loss

        return model, step

    eager_model, eager_step = make()
    model, step = make()
    compiled = verigrad.compile(step)
    for _ in range(20):
        assert _bits(compiled(x, y)) == _bits(eager_step(x, y))
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert _bits(p) == _bits(q)
    program = compiled.program(x, y)
    assert [v.name for v in program.inputs] == ["x", "y", "model.w1", "model.b1", "model.w2", "model.b2"]


@pytest.mark.parametrize("model_name", ["cnn", "mlp"])
def test_compiled_forward_is_bit_identical_for_every_batch(model_name, rng):
    verigrad.manual_seed(3)
    model = _cnn() if model_name == "cnn" else _mlp()
    compiled = verigrad.compile(model)
    sizes = [8, 3, 8, 5, 3]
    for batch in sizes:
        x = verigrad.tensor(_data(model_name, rng, batch)[0])
        with_history = compiled(x)  # grad on: a backward() outside reaches the model
        assert with_history.requires_grad and _bits(with_history.detach()) == _bits(model(x).detach())
        with verigrad.no_grad():
            assert _bits(compiled(x)) == _bits(model(x))
    # traced with grad on (its forward half a plan for each batch size) and under no_grad (the same)
    assert compiled.stats() == {"traces": 2, "plans": 6, "hits": 4}
    program = compiled.program(x)
    assert program.inputs[0].spec == spec([B, *x.shape[1:]])


# symbolic specs ---------------------------------------------------------------------------------------
class GlobalAveragePool(nn.Module):
    def forward(self, x):
        return x.mean(axis=(2, 3))


def _gap_model():
    """A CNN whose classifier does not depend on the image size: it serves every H x W."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        GlobalAveragePool(),
        nn.Linear(8, 10),
    )


def _gap_setup():
    verigrad.manual_seed(11)
    model = _gap_model()
    opt = verigrad.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, loss_fn)

    return model, step


def test_explicit_specs_serve_two_image_sizes_from_one_trace(rng):
    eager_model, eager_step = _gap_setup()
    model, step = _gap_setup()
    compiled = verigrad.compile(step, specs=(spec([B, 1, H, W]), spec([B], "i64")))
    for size, batch in [(8, 4), (16, 4), (8, 4), (16, 4)]:
        x = rng.standard_normal((batch, 1, size, size)).astype(np.float32)
        y = rng.integers(0, 10, batch)
        assert _bits(compiled(x, y)) == _bits(eager_step(verigrad.tensor(x), verigrad.tensor(y)))
    assert compiled.stats() == {"traces": 1, "plans": 2, "hits": 2}  # 8x8 and 16x16
    x, y = rng.standard_normal((2, 1, 12, 4)).astype(np.float32), rng.integers(0, 10, 2)
    assert _bits(compiled(x, y)) == _bits(eager_step(verigrad.tensor(x), verigrad.tensor(y)))
    assert compiled.stats() == {"traces": 1, "plans": 3, "hits": 2}
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert _bits(p) == _bits(q)
    text = str(compiled.program(x, y))
    assert "%0 x: f32[B,1,H,W]" in text and "f32[B,8,H/4,W/4]" in text


def test_a_linear_layer_sized_by_h_and_w_cannot_be_symbolic():
    """digits_cnn's Linear takes C2 * H/4 * W/4 inputs: its parameters must be made with sizes, so a
    program with symbolic H and W is refused (while tracing, at the user's line), not run wrong."""
    model = verigrad.models.digits_cnn(8, 8)
    compiled = verigrad.compile(model, specs=(spec([B, 1, H, W]),))
    with pytest.raises(ShapeError) as info:
        compiled(np.zeros((2, 1, 8, 8), np.float32))
    message = str(info.value)
    assert message.startswith("matmul(f32[B, H*W*2], f32[128, 10]): the contracted dimensions differ")
    assert "in layer 7 (Linear(in_features=128" in message and f"at {__file__}:" in message


@pytest.fixture
def gap_compiled():
    _, step = _gap_setup()
    compiled = verigrad.compile(step, specs=(spec([B, 1, H, W]), spec([B], "i64")))
    compiled(np.zeros((2, 1, 8, 8), np.float32), np.zeros(2, np.int64))
    return compiled


@pytest.mark.parametrize(
    ("x", "y", "error", "words"),
    [
        (
            np.zeros((2, 1, 10, 8), np.float32),
            np.zeros(2, np.int64),
            ShapeError,
            ["x", "H = 10", "multiple of 4"],
        ),
        (
            np.zeros((2, 1, 8, 6), np.float32),
            np.zeros(2, np.int64),
            ShapeError,
            ["x", "W = 6", "multiple of 4"],
        ),
        (np.zeros((2, 1, 8, 8), np.float64), np.zeros(2, np.int64), DTypeError, ["x", "f64", "f32"]),
        (np.zeros((2, 1, 8, 8), np.float32), np.zeros(2, np.int32), DTypeError, ["y", "i32", "i64"]),
        (np.zeros((2, 8, 8), np.float32), np.zeros(2, np.int64), ShapeError, ["x", "rank", "[B, 1, H, W]"]),
        (np.zeros((2, 1, 8, 8), np.float32), np.zeros(3, np.int64), ShapeError, ["y", "B = 2", "is 3"]),
        (np.zeros((2, 3, 8, 8), np.float32), np.zeros(2, np.int64), ShapeError, ["x", "dimension 1", "3"]),
    ],
)
def test_arguments_that_break_the_contract_are_named(gap_compiled, x, y, error, words):
    with pytest.raises(error) as info:
        gap_compiled(x, y)
    message = str(info.value)
    assert message.startswith(f"argument {words[0]}:")
    for word in words[1:]:
        assert word in message, message
    assert gap_compiled.stats()["traces"] == 1  # refused before anything ran


def test_the_wrong_number_of_arguments_is_refused(gap_compiled):
    with pytest.raises(TypeError, match="compiled for 2 argument"):
        gap_compiled(np.zeros((2, 1, 8, 8), np.float32))
    f = verigrad.compile(lambda x, y: x + y)
    f(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        f(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float32))


def test_a_shape_error_while_tracing_points_at_the_users_line():
    w = verigrad.ones(5, 3)

    def forward(x):
        return (x @ w).relu()  # the bad line

    line = forward.__code__.co_firstlineno + 1
    with pytest.raises(ShapeError) as info:
        verigrad.compile(forward)(np.ones((4, 4), np.float32))
    assert f"{__file__}:{line}" in str(info.value)
    with pytest.raises(ShapeError) as info:
        verigrad.compile(forward, specs=(spec([B, 4]),))(np.ones((4, 4), np.float32))
    assert f"{__file__}:{line}" in str(info.value) and "f32[B, 4]" in str(info.value)


# the cache ------------------------------------------------------------------------------------------
def test_one_trace_for_every_batch_and_a_plan_per_binding():
    f = verigrad.compile(lambda x, w: (x @ w).relu().sum(axis=1))
    w = np.ones((3, 2), np.float32)
    for n in [4, 5, 4, 4, 6]:
        out = f(np.ones((n, 3), np.float32), w)
        assert out.shape == (n,) and out.tolist() == [6.0] * n
    assert f.stats() == {"traces": 1, "plans": 3, "hits": 2}
    f(np.ones((4, 3), np.float64), w.astype(np.float64))  # other dtypes: another program
    assert f.stats() == {"traces": 2, "plans": 4, "hits": 2}


def test_layouts_are_part_of_the_plan_key(rng):
    f = verigrad.compile(lambda x: (x * 2).sum(axis=0))
    a = rng.standard_normal((4, 6)).astype(np.float32)
    contiguous = f(a[:, :3].copy())
    strided = verigrad.tensor(a)[:, :3]  # a view: not C-contiguous
    assert not strided.is_contiguous()
    assert _bits(f(strided)) == _bits(contiguous) == _bits((strided * 2).sum(axis=0))
    assert f.stats() == {"traces": 1, "plans": 2, "hits": 0}
    f(a[:, :3].copy())
    assert f.stats()["hits"] == 1


def test_a_function_that_needs_concrete_sizes_is_traced_per_size():
    f = verigrad.compile(lambda x: x.reshape(4, -1).sum(axis=0))
    assert f(np.ones((4, 3), np.float32)).tolist() == [4.0] * 3
    assert f(np.arange(24, dtype=np.float32).reshape(8, 3)).tolist() == [36.0 + 4 * k for k in range(6)]
    assert f(np.ones((4, 3), np.float32)).tolist() == [4.0] * 3
    assert f.stats() == {"traces": 2, "plans": 2, "hits": 1}


def test_results_keep_their_structure():
    f = verigrad.compile(lambda x: {"double": x * 2, "pair": (x + 1, None), "n": 3})
    out = f(np.ones(2, np.float32))
    assert set(out) == {"double", "pair", "n"} and out["n"] == 3
    assert out["double"].tolist() == [2, 2] and out["pair"][0].tolist() == [2, 2] and out["pair"][1] is None


def test_write_back_of_swapped_tensors():
    def make():
        a, b = verigrad.tensor([1.0, 2.0]), verigrad.tensor([3.0, 4.0])

        def swap(x):
            old = a * 1
            a.assign(b)
            b.assign(old + x)
            return a + b

        return a, b, swap

    a_e, b_e, swap_e = make()
    a, b, swap = make()
    compiled = verigrad.compile(swap)
    for _ in range(3):
        x = np.array([0.5, 0.25], np.float32)
        assert _bits(compiled(x)) == _bits(swap_e(verigrad.tensor(x)))
        assert _bits(a) == _bits(a_e) and _bits(b) == _bits(b_e)
    assert (a.tolist(), b.tolist()) == ([3.5, 4.25], [2.0, 2.5])

    c, d = verigrad.tensor([1.0]), verigrad.tensor([2.0])

    def exchange(x):
        old = c.reshape(1)
        c.assign(d.reshape(1))
        d.assign(old)
        return x

    verigrad.compile(exchange)(np.zeros(1, np.float32))
    # the program's meaning: `old` is c's value before the assignment, whether or not the reshape
    # kernel returns a view of c's memory (eagerly, the reference's reshape is a view that follows c)
    assert (c.tolist(), d.tolist()) == ([2.0], [1.0])


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_writes_into_arguments_reach_the_callers_tensors_as_eagerly(backend):
    """A compiled function that writes into its argument (whole, a slice, through a view held in a
    variable) leaves the caller's tensor, or NumPy array, as the eager call does, call after call."""
    count = verigrad.tensor(np.zeros((), np.float32))

    def scatter(x, v):
        x[0] += v.sum(0)
        row = x[1:]
        row *= 2.0
        x.clamp_(-5.0, 5.0)
        count.add_(1.0)
        return x.sum()

    compiled = verigrad.compile(scatter)
    assert "x <- %" in str(compiled.program(np.zeros((3, 2), np.float32), np.ones((4, 2), np.float32)))
    rng = np.random.default_rng(0)
    with verigrad.backend(backend):
        for n in (4, 4, 6):
            x0, v = (rng.standard_normal(s).astype(np.float32) for s in ((n, 2), (n, 2)))
            eager_x = verigrad.tensor(x0.copy())
            expected = scatter(eager_x, verigrad.tensor(v))
            as_tensor, as_array = verigrad.tensor(x0.copy()), x0.copy()
            assert _bits(compiled(as_tensor, v)) == _bits(expected)
            compiled(as_array, v)
            assert _bits(as_tensor) == _bits(eager_x) and as_array.tobytes() == eager_x.numpy().tobytes()
    assert count.item() == 9.0  # three eager calls, six compiled ones


def test_compiled_functions_compose_with_trace_grad_and_check():
    f = verigrad.compile(lambda x: (x * x).sum())
    program = verigrad.trace(f, spec([B]))
    assert [i.name for i in program.instrs] == ["mul", "sum"]
    x = verigrad.tensor([1.0, 2.0])
    assert verigrad.grad(f)(x).tolist() == [2.0, 4.0]  # arguments that require grad run eagerly
    assert verigrad.check(f, spec([B])) == spec([])
    g = verigrad.compile(verigrad.value_and_grad(lambda x, w: (x @ w).sum(), argnums=(0, 1)))
    value, (gx, gw) = g(np.ones((3, 2), np.float32), np.full((2, 4), 2.0, np.float32))
    assert float(value) == 48 and gx.tolist() == [[8.0, 8.0]] * 3 and gw.tolist() == [[3.0] * 4] * 2
    assert "backward:" in str(g.program(np.ones((3, 2), np.float32), np.ones((2, 4), np.float32)))


def test_a_backward_pass_whose_gradients_nothing_uses_is_refused():
    """A compiled call keeps `.grad` as it was, so `loss.backward()` with the optimizer step left
    outside would lose the gradients (and the step would silently do nothing): it is refused before
    anything runs."""
    verigrad.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)
    before = [p.numpy().copy() for p in model.parameters()]

    def forward_backward(x):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="forward_backward runs a backward pass but uses none"):
        verigrad.compile(forward_backward)(np.ones((4, 3), np.float32))
    assert all(p.grad is None for p in model.parameters())
    assert all(np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before))

    def with_step(x):
        loss = forward_backward(x)
        opt.step()
        return loss

    verigrad.compile(with_step)(np.ones((4, 3), np.float32))  # the gradients feed the update
    assert not np.array_equal(model.weight.numpy(), before[0])


def test_grads_are_not_left_traced_after_a_compiled_step():
    verigrad.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)
    earlier = verigrad.zeros(2, 3)
    model.weight.grad = earlier

    def step(x):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = verigrad.compile(step)
    compiled(np.ones((4, 3), np.float32))
    compiled(np.ones((4, 3), np.float32))
    assert model.weight.grad is earlier and model.bias.grad is None
    assert all(isinstance(p.payload, np.ndarray) for p in model.parameters())
    assert opt.steps == 2
