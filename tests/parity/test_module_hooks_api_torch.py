"""Module hooks PyTorch programs use besides forward and backward ones, run in both libraries: the state
dict hooks (pre, post, the private post-hook whose returned dict replaces the root's, the load post-hooks
that see and edit the missing and unexpected keys in PyTorch's order), the global module hooks of
`nn.modules.module`, `always_call=` forward hooks, a module's extra state, `torch.backends.mha`'s
fast-path switch, and `grad_fn.next_functions`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _state_dict_hooks(t) -> list:
    nn = t.nn
    log = []
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 1)))
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: log.append(("pre", prefix, keep)))
    m[1].register_state_dict_pre_hook(lambda mod, prefix, keep: log.append(("pre1", prefix, keep)))

    def post(mod, sd, prefix, meta):
        log.append(("post", prefix, sorted(sd), sorted(meta)))
        sd[prefix + "extra"] = t.zeros(1)

    m[1].register_state_dict_post_hook(post)
    sd = m.state_dict()
    log.append(sorted(sd))
    h = m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"only": t.ones(1)})
    log.append(sorted(m.state_dict()))
    h.remove()
    try:
        m.register_state_dict_post_hook(lambda mod, sd, p, meta: {"x": 1})
        m.state_dict()
    except RuntimeError as e:
        log.append(str(e))
    # load post hooks
    m2 = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 1)))

    def lpost(mod, keys):
        log.append(
            ("lpost", type(mod).__name__, list(keys.missing_keys), list(keys.unexpected_keys), repr(keys))
        )

    m2[1].register_load_state_dict_post_hook(lpost)
    m2.register_load_state_dict_post_hook(lpost)
    state = {k: v for k, v in m2.state_dict().items()}
    state.pop("1.0.bias")
    state["zz"] = t.zeros(1)
    state["1.0.q"] = t.zeros(1)
    state["aa"] = t.zeros(1)
    state["nope.w"] = t.zeros(1)
    r = m2.load_state_dict(state, strict=False)
    log.append(repr(r))

    def clear(mod, keys):
        keys.missing_keys.clear()
        keys.unexpected_keys.clear()

    m2.register_load_state_dict_post_hook(clear)
    log.append(repr(m2.load_state_dict(state)))
    m3 = nn.Linear(2, 2)
    m3.register_load_state_dict_post_hook(
        lambda mod, k: log.append(("w", mod.weight.detach().numpy().tolist()))
    )
    m3.load_state_dict({"weight": t.ones(2, 2), "bias": t.zeros(2)})
    m4 = nn.Linear(2, 2)
    m4.register_load_state_dict_post_hook(lambda mod, k: k.missing_keys.append("ghost"))
    try:
        m4.load_state_dict({"weight": t.ones(2, 2), "bias": t.zeros(2)})
    except RuntimeError:
        log.append("raised")
    try:
        m5 = nn.Linear(2, 2)
        m5.register_load_state_dict_post_hook(lambda mod, k: 1)
        m5.load_state_dict(m5.state_dict())
    except AssertionError:
        log.append("assert")
    return log


def _global_and_always_called_hooks(t) -> list:
    nn = t.nn
    log = []
    mm = t.nn.modules.module
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    h1 = mm.register_module_forward_pre_hook(lambda mod, args: log.append(("gpre", type(mod).__name__)))
    h2 = mm.register_module_forward_hook(lambda mod, args, out: log.append(("gfwd", type(mod).__name__)))
    m[0].register_forward_hook(lambda mod, args, out: log.append(("own", type(mod).__name__)))
    h3 = mm.register_module_full_backward_hook(
        lambda mod, gi, go: log.append(("gbw", type(mod).__name__, len(gi), len(go)))
    )
    h4 = mm.register_module_full_backward_pre_hook(lambda mod, go: log.append(("gbwpre", type(mod).__name__)))
    x = t.ones(1, 2, requires_grad=True)
    m(x).sum().backward()
    for h in (h1, h2, h3, h4):
        h.remove()
    m(x)

    # always_call
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    b = Boom()
    b.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
    b.register_forward_hook(lambda mod, args, out: log.append(("not", out)))
    try:
        b(t.ones(1))
    except ValueError:
        log.append("raised")
    layer = nn.Linear(2, 2)
    layer.register_forward_hook(
        lambda mod, args, out: log.append(("always-ok", tuple(out.shape))), always_call=True
    )
    layer(t.ones(1, 2))
    h = mm.register_module_forward_hook(lambda mod, args, out: log.append(("galways", out)), always_call=True)
    try:
        b(t.ones(1))
    except ValueError:
        log.append("raised")
    h.remove()
    # with_kwargs pre-hook returning wrong thing
    l2 = nn.Linear(2, 2)
    l2.register_forward_pre_hook(lambda mod, a, k: a, with_kwargs=True)
    try:
        l2(t.ones(1, 2))
    except RuntimeError as e:
        log.append(str(e)[:40])
    return log


def _extra_state(t) -> list:
    """get_extra_state / set_extra_state: saved under _extra_state, loaded back, missing or unexpected."""
    nn = t.nn
    log = []

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.calls = 0

        def get_extra_state(self):
            return {"calls": self.calls}

        def set_extra_state(self, state):
            self.calls = state["calls"]

    m = nn.Sequential(Counter(), nn.ReLU())
    m[0].calls = 7
    sd = m.state_dict()
    log.append(list(sd))
    log.append(sd["0._extra_state"])
    m2 = nn.Sequential(Counter(), nn.ReLU())
    m2.load_state_dict(sd)
    log.append(m2[0].calls)
    sd2 = dict(sd)
    del sd2["0._extra_state"]
    log.append(repr(m2.load_state_dict(sd2, strict=False)))
    plain = nn.Sequential(nn.Linear(2, 2))
    log.append(repr(plain.load_state_dict({**plain.state_dict(), "0._extra_state": 1}, strict=False)))
    return log


@pytest.mark.parametrize("case", [_state_dict_hooks, _global_and_always_called_hooks, _extra_state])
def test_hooks_run_as_pytorchs(case) -> None:
    ours, theirs = case(verigrad), case(torch)
    assert len(theirs) >= 5
    assert ours == theirs


def test_a_load_post_hook_sees_the_loaded_weights_and_strict_follows_its_edits() -> None:
    model = verigrad.nn.Linear(2, 2)
    seen = []
    model.register_load_state_dict_post_hook(lambda m, keys: seen.append(m.weight.detach().numpy().copy()))
    model.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(seen[0], np.ones((2, 2)))
    model.register_load_state_dict_post_hook(lambda m, keys: keys.unexpected_keys.clear())
    model.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2), "extra": np.ones(1)})


def _fast_path_answers(t, flag: bool) -> tuple[np.ndarray, np.ndarray]:
    t.manual_seed(0)
    encoder = t.nn.TransformerEncoder(
        t.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0), 2, enable_nested_tensor=True
    ).eval()
    attention = t.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    rng = np.random.default_rng(0)
    with t.no_grad():  # the same weights in both libraries
        for p in [*encoder.parameters(), *attention.parameters()]:
            p.copy_(t.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) / 4))
    x = t.tensor(rng.standard_normal((2, 3, 8)).astype(np.float32))
    padding = t.tensor([[False, False, True], [False, True, True]])
    before = t.backends.mha.get_fastpath_enabled()
    t.backends.mha.set_fastpath_enabled(flag)
    try:
        with t.no_grad():
            encoded = encoder(x, src_key_padding_mask=padding)
            attended, _ = attention(x, x, x, key_padding_mask=t.ones(2, 3, dtype=t.bool), need_weights=False)
    finally:
        t.backends.mha.set_fastpath_enabled(before)
    return encoded.numpy(), attended.numpy()


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("flag", [True, False])
def test_the_mha_fast_path_switch_as_pytorchs(flag) -> None:
    ours, theirs = _fast_path_answers(verigrad, flag), _fast_path_answers(torch, flag)
    assert (theirs[0][0, 2] == 0).all() == flag  # the padded position: the fast path's 0
    assert np.isnan(theirs[1]).all() == flag  # every key masked: the fast path's NaN, else 0
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert verigrad.backends.mha.get_fastpath_enabled()


def _next_functions(t) -> list:
    a = t.ones(2, requires_grad=True)
    y = (a * t.ones(2)).sum()
    mul, _ = y.grad_fn.next_functions[0]
    accumulate, index = mul.next_functions[0][0], mul.next_functions[0][1]
    again = (a * 2).grad_fn.next_functions[0][0]
    return [
        len(y.grad_fn.next_functions),
        [(n is None, i) for n, i in mul.next_functions],
        accumulate.variable is a,
        again is accumulate,
        accumulate.next_functions,
        index,
        isinstance(accumulate, t.autograd.graph.Node),
        type(accumulate).__name__,
        y.grad_fn.name(),
    ]


def test_next_functions_as_pytorchs() -> None:
    assert _next_functions(verigrad) == _next_functions(torch)
