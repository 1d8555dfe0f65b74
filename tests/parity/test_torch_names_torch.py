"""Names PyTorch programs call that verigrad lacked: torch.clamp_min/clamp_max and their in-place forms,
torch.linalg.matmul, Tensor.put/put_, torch.vander, the torch.* spellings of functional's functions
(torch.conv2d, torch.dropout, torch.batch_norm's own argument order, ...), Tensor's other names
(divide, greater, ...) and in-place methods, the constants; each against torch on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(43)


def both(array: np.ndarray) -> tuple[verigrad.Tensor, torch.Tensor]:
    return verigrad.from_numpy(array.copy()), torch.from_numpy(array.copy())


def same(ours, theirs) -> None:
    assert ours.dtype.name == {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64",
                               torch.int32: "i32", torch.bool: "bool"}[theirs.dtype]  # fmt: skip
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())


@pytest.mark.parametrize("name", ["clamp_min", "clamp_max"])
def test_clamp_min_max_functions_methods_and_in_place(name):
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    bound = RNG.standard_normal((4,)).astype(np.float32)
    ours, theirs = both(a)
    same(getattr(verigrad, name)(ours, 0.25), getattr(torch, name)(theirs, 0.25))
    same(
        getattr(verigrad, name)(ours, verigrad.from_numpy(bound)),
        getattr(torch, name)(theirs, torch.from_numpy(bound)),
    )
    same(getattr(ours, name + "_")(0.1), getattr(theirs, name + "_")(0.1))
    same(ours, theirs)
    same(getattr(verigrad, name + "_")(ours, -0.2), getattr(torch, name + "_")(theirs, -0.2))
    ints_ours, ints_theirs = both(np.arange(-3, 4))
    same(getattr(ints_ours, name + "_")(1), getattr(ints_theirs, name + "_")(1))


@pytest.mark.parametrize("name", ["clamp_min", "clamp_max"])
def test_clamp_min_max_gradients(name):
    x = RNG.standard_normal((5, 3))
    lo = RNG.standard_normal((3,))
    check_values_and_gradients(
        {"x": x, "b": lo},
        lambda x, b: getattr(verigrad, name)(x, b),
        lambda x, b: getattr(torch, name)(x, b),
    )


def test_linalg_matmul_is_matmul():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5))
    check_values_and_gradients(
        {"a": a, "b": b}, lambda a, b: verigrad.linalg.matmul(a, b), lambda a, b: torch.linalg.matmul(a, b)
    )


@pytest.mark.parametrize("accumulate", [False, True])
def test_tensor_put_and_put_(accumulate):
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    index = np.array([[0, -1], [5, 5]])
    source = RNG.standard_normal((2, 2)).astype(np.float32)
    ours, theirs = both(a)
    (oi, ti), (os_, ts) = both(index), both(source)
    same(ours.put(oi, os_, accumulate=accumulate), theirs.put(ti, ts, accumulate=accumulate))
    if accumulate:  # a repeated index without accumulate: PyTorch leaves which write wins undefined
        same(ours.put_(oi, os_, accumulate=True), theirs.put_(ti, ts, accumulate=True))
        same(ours, theirs)
    else:
        one, two = both(np.array([1, -2]))
        same(ours.put_(one, os_[0], accumulate=False), theirs.put_(two, ts[0], accumulate=False))
        same(ours, theirs)


@pytest.mark.parametrize("N", [None, 0, 1, 2, 5])
@pytest.mark.parametrize("increasing", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_vander_against_torch(N, increasing, dtype):
    x = (RNG.standard_normal(4) * 3).astype(dtype)
    ours, theirs = both(x)
    same(verigrad.vander(ours, N=N, increasing=increasing), torch.vander(theirs, N=N, increasing=increasing))


def test_vander_gradient_and_refusals():
    x = RNG.standard_normal(4)
    # torch.vander's own backward raises (a tensor it saved is written in place): against x**k
    check_values_and_gradients(
        {"x": x},
        lambda x: verigrad.vander(x, 5),
        lambda x: x[:, None] ** torch.arange(4, -1, -1, dtype=x.dtype),
    )
    with pytest.raises(verigrad.ShapeError, match="one-dimensional"):
        verigrad.vander(verigrad.ones(2, 2))
    with pytest.raises(ValueError, match="non-negative"):
        verigrad.vander(verigrad.ones(2), N=-1)


def test_torch_spellings_of_functional_take_torchs_arguments():
    x = RNG.standard_normal((2, 3, 6, 6))
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    mean, var = RNG.standard_normal(3), RNG.random(3) + 0.5
    # torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
    check_values_and_gradients(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: verigrad.batch_norm(x, w, b, verigrad.from_numpy(mean), verigrad.from_numpy(var),
                                            False, 0.1, 1e-5, True),
        lambda x, w, b: torch.batch_norm(x, w, b, torch.from_numpy(mean), torch.from_numpy(var),
                                         False, 0.1, 1e-5, True),
    )  # fmt: skip
    check_values_and_gradients(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: verigrad.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
        lambda x, w, b: torch.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
    )
    check_values_and_gradients(
        {"x": x, "w": RNG.standard_normal(6), "b": RNG.standard_normal(6)},
        lambda x, w, b: verigrad.layer_norm(x, [6], w, b, 1e-5, True),
        lambda x, w, b: torch.layer_norm(x, [6], w, b, 1e-5, True),
    )
    check_values_and_gradients(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: verigrad.group_norm(x, 3, w, b, 1e-5, True),
        lambda x, w, b: torch.group_norm(x, 3, w, b, 1e-5, True),
    )
    check_values_and_gradients(
        {"x": x, "w": RNG.standard_normal(6)},
        lambda x, w: verigrad.rms_norm(x, [6], w, 1e-6),
        lambda x, w: torch.rms_norm(x, [6], w, 1e-6),
    )
    check_values_and_gradients(
        {"x": x}, lambda x: verigrad.dropout(x, 0.5, False), lambda x: torch.dropout(x, 0.5, False)
    )
    check_values_and_gradients(
        {"x": x}, lambda x: verigrad.max_pool2d(x, 2), lambda x: torch.max_pool2d(x, 2)
    )
    check_values_and_gradients(
        {"x": x, "k": RNG.standard_normal((4, 3, 3, 3))},
        lambda x, k: verigrad.conv2d(x, k, None, 1, 1),
        lambda x, k: torch.conv2d(x, k, None, 1, 1),
    )
    seq = RNG.standard_normal((2, 3, 7))
    ours, theirs = (
        verigrad.adaptive_max_pool1d(verigrad.from_numpy(seq), 3),
        torch.adaptive_max_pool1d(torch.from_numpy(seq), 3),
    )
    same(ours[0], theirs[0])
    same(ours[1], theirs[1])
    table, idx = RNG.standard_normal((5, 3)), np.array([[0, 4], [2, 2]])
    check_values_and_gradients(
        {"w": table},
        lambda w: verigrad.embedding(w, verigrad.from_numpy(idx), 2),
        lambda w: torch.embedding(w, torch.from_numpy(idx), 2),
    )
    check_values_and_gradients(
        {"w": table},
        lambda w: verigrad.embedding(w, verigrad.from_numpy(idx)),
        lambda w: torch.embedding(w, torch.from_numpy(idx)),
    )
    a, c = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    check_values_and_gradients(
        {"a": a, "c": c},
        lambda a, c: verigrad.cosine_similarity(a, c),
        lambda a, c: torch.cosine_similarity(a, c),
    )


def test_torch_functions_and_constants():
    assert (verigrad.pi, verigrad.e, verigrad.inf, verigrad.newaxis) == (
        torch.pi,
        torch.e,
        torch.inf,
        torch.newaxis,
    )
    assert np.isnan(verigrad.nan)
    a, c = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    for name in ["divide", "multiply", "subtract"]:
        check_values_and_gradients(
            {"a": a, "c": c},
            lambda a, c: getattr(verigrad, name)(a, c),
            lambda a, c: getattr(torch, name)(a, c),
        )
    (oa, ta), (oc, tc) = both(a), both(c)
    for name in ["greater", "greater_equal", "less", "less_equal", "not_equal"]:
        same(getattr(verigrad, name)(oa, oc), getattr(torch, name)(ta, tc))
        same(getattr(oa, name)(oc), getattr(ta, name)(tc))
    same(verigrad.t(oa), torch.t(ta))
    same(verigrad.clone(oa), torch.clone(ta))
    same(verigrad.detach(oa), torch.detach(ta))
    same(verigrad.relu_(oa.clone()), torch.relu_(ta.clone()))
    same(verigrad.clamp_(oa.clone(), -0.5, 0.5), torch.clamp_(ta.clone(), -0.5, 0.5))


IN_PLACE_CALLS = [
    ("sin_", ()), ("cos_", ()), ("tanh_", ()), ("log1p_", ()), ("expm1_", ()), ("erf_", ()), ("frac_", ()),
    ("eq_", (0.0,)), ("gt_", ("other",)), ("le_", ("other",)), ("hypot_", ("other",)), ("atan2_", ("other",)),
    ("addcmul_", ("other", "other")), ("addcdiv_", ("other", "other")), ("cumsum_", (1,)), ("cumprod_", (0,)),
    ("tril_", ()), ("triu_", (1,)), ("logical_and_", ("other",)), ("lerp_", ("other", 0.25)),
    ("divide_", ("other",)), ("multiply_", ("other",)), ("subtract_", ("other",)), ("clip_", (-0.5, 0.5)),
    ("nan_to_num_", ()), ("deg2rad_", ()), ("sgn_", ()), ("float_power_", (2,)),
]  # fmt: skip


@pytest.mark.parametrize("name,args", IN_PLACE_CALLS, ids=[c[0] for c in IN_PLACE_CALLS])
def test_in_place_methods_match_torch(name, args):
    a = RNG.standard_normal((3, 4))
    other = RNG.random((3, 4)) + 0.5
    ours, theirs = both(a)
    (oo, to) = both(other)
    oargs = [oo if x == "other" else x for x in args]
    targs = [to if x == "other" else x for x in args]
    out_of_place = getattr(ours, name[:-1].replace("clip", "clamp"))(*oargs)
    out = getattr(ours, name)(*oargs)
    expected = getattr(theirs, name)(*targs)
    assert out is ours and out.dtype.name == "f64"
    np.testing.assert_array_equal(out.numpy(), out_of_place.numpy())  # the op's bits, written into x
    np.testing.assert_allclose(ours.numpy(), expected.numpy(), rtol=1e-15, atol=1e-15)


def test_addmm_baddbmm_methods_and_tensor_attributes():
    x, m1, m2 = RNG.standard_normal((2, 5)), RNG.standard_normal((2, 3)), RNG.standard_normal((3, 5))
    check_values_and_gradients(
        {"x": x, "a": m1, "b": m2},
        lambda x, a, b: x.addmm(a, b, beta=0.5, alpha=2.0),
        lambda x, a, b: x.addmm(a, b, beta=0.5, alpha=2.0),
    )
    xb, b1, b2 = (
        RNG.standard_normal((4, 2, 5)),
        RNG.standard_normal((4, 2, 3)),
        RNG.standard_normal((4, 3, 5)),
    )
    check_values_and_gradients(
        {"x": xb, "a": b1, "b": b2},
        lambda x, a, b: x.baddbmm(a, b, alpha=0.5),
        lambda x, a, b: x.baddbmm(a, b, alpha=0.5),
    )
    ours, theirs = both(RNG.standard_normal((3, 4)).astype(np.float32))
    assert (ours.nbytes, ours.itemsize, ours.is_signed(), ours.is_complex()) == (
        theirs.nbytes, theirs.itemsize, theirs.is_signed(), theirs.is_complex()
    )  # fmt: skip
    ou8, tu8 = both(np.arange(3, dtype=np.uint8))
    assert ou8.is_signed() == tu8.is_signed()
    o = ours.requires_grad_() * 2
    t = theirs.requires_grad_() * 2
    assert o.retains_grad == t.retains_grad is False
    o.retain_grad()
    t.retain_grad()
    assert o.retains_grad == t.retains_grad is True
    assert ours.retains_grad == theirs.retains_grad is False


VIEWS = [
    lambda z: z[1:],
    lambda z: z[:, 2:],
    lambda z: z.t(),
    lambda z: z[2],
    lambda z: z.view(-1)[5:],
    lambda z: z.reshape(6, 4)[1:],
    lambda z: z[1:][1:],
    lambda z: z.clone(),
    lambda z: z.transpose(0, 1)[1],
]


@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_storage_offset_and_data_ptr_as_torch(view):
    ours, theirs = both(np.arange(24.0).reshape(4, 6))
    o, t = VIEWS[view](ours), VIEWS[view](theirs)
    assert o.storage_offset() == t.storage_offset()
    assert (o.data_ptr() == ours.data_ptr()) == (t.data_ptr() == theirs.data_ptr())


def test_views_in_place_new_detach_and_random_as_torch():
    for t in (torch, verigrad):
        x = t.ones(2, 3)
        assert x.unsqueeze_(0) is x and tuple(x.shape) == (1, 2, 3)
        assert tuple(x.squeeze_().t_().shape) == (3, 2)
        assert tuple(x.transpose_(0, 1).shape) == (2, 3)
        assert tuple(x.swapdims_(0, 1).shape) == (3, 2)
        assert tuple(x.new(2, 4).shape) == (2, 4) and tuple(x.new(t.Size([3, 1])).shape) == (3, 1)
        assert x.new((3, 1)).tolist() == [3.0, 1.0] and x.new([1, 2]).tolist() == [1.0, 2.0]
        assert tuple(x.new().shape) == (0,)
        y = t.ones(2, requires_grad=True) * 2
        assert y.detach_() is y and not y.requires_grad and y.grad_fn is None and y.is_leaf
        draws = t.zeros(2000).random_(3, 7)
        assert sorted(set(draws.tolist())) == [3.0, 4.0, 5.0, 6.0]
        draws = t.zeros(2000, dtype=t.int64).random_(5)
        assert sorted(set(draws.tolist())) == [0, 1, 2, 3, 4]
    shared = verigrad.ones(2, 3)
    view = shared[0]
    shared.unsqueeze_(0)
    view[0] = 5.0  # still a view of the same memory, as PyTorch's
    assert shared[0, 0, 0].item() == 5.0
    for t in (torch, verigrad):  # a leaf that requires grad: PyTorch's error
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            t.ones(2, requires_grad=True).unsqueeze_(0)
