"""What PyTorch programs reach for that verigrad lacked (without PyTorch; the parity file holds them to
PyTorch): Adafactor, Muon and SparseAdam, CyclicLR, packed sequences, MultiheadAttention's kdim/vdim,
AdaptiveLogSoftmaxWithLoss, nn.init.dirac_, linalg's lstsq drivers and pinv(hermitian=True)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import nn, optim
from verigrad.cli.trainer import training_step

# optimizers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("Adafactor", {"lr": 0.05, "weight_decay": 0.01}), ("Muon", {"lr": 0.02, "nesterov": True})],
)
def test_new_optimizers_compiled_equal_eager(name, kwargs) -> None:
    """Their updates are ops: a compiled training step gives the eager step's bits (Adafactor's step
    size, which PyTorch reads with .item(), stays a tensor)."""
    weights = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        model = nn.Linear(4, 3, bias=False, dtype="f64")
        start = model.weight.numpy().copy()
        optimizer = getattr(optim, name)(model.parameters(), **kwargs)
        x = verigrad.tensor(np.random.default_rng(0).standard_normal((8, 4)))
        y = verigrad.tensor(np.arange(8) % 3)
        step = training_step(model, optimizer, nn.CrossEntropyLoss())
        run = verigrad.compile(step) if compiled else step
        for _ in range(6):
            run(x, y)
        weights.append(model.weight.numpy().copy())
    assert np.abs(weights[0] - start).max() > 1e-3
    np.testing.assert_array_equal(weights[0], weights[1])


def test_adafactor_state_is_factored_as_pytorchs() -> None:
    w, b = verigrad.zeros(3, 4, 5, requires_grad=True), verigrad.zeros(5, requires_grad=True)
    opt = optim.Adafactor([w, b])
    assert opt.state[w] == {}
    w.grad, b.grad = verigrad.ones(3, 4, 5), verigrad.ones(5)
    opt.step()
    assert {k: tuple(v.shape) for k, v in opt.state[w].items()} == {
        "step": (), "row_var": (3, 4, 1), "col_var": (3, 1, 5)}  # fmt: skip
    assert {k: tuple(v.shape) for k, v in opt.state[b].items()} == {"step": (), "variance": (5,)}
    assert float(opt.state[b]["step"]) == 1.0


def test_muon_refuses_what_pytorchs_refuses() -> None:
    matrix, vector = verigrad.zeros(2, 3, requires_grad=True), verigrad.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters .*size: .*\[3\]"):
        optim.Muon([matrix, vector])
    opt = optim.Muon([matrix])
    with pytest.raises(ValueError, match="Muon only supports 2D"):
        opt.add_param_group({"params": [vector]})
    assert len(opt.param_groups) == 1
    with pytest.raises(ValueError, match="Adjust learning rate function bad is not supported"):
        optim.Muon([matrix], adjust_lr_fn="bad")
    with pytest.raises(TypeError, match="Tensor lr"):
        optim.Muon([matrix], lr=verigrad.tensor(0.1))
    matrix.grad = verigrad.ones(2, 3)
    opt.step()
    assert set(opt.state[matrix]) == {"momentum_buffer"}  # PyTorch's Muon counts no steps


def test_sparse_adam_refuses_a_dense_gradient_before_any_write() -> None:
    p = verigrad.ones(3, requires_grad=True)
    opt = optim.SparseAdam([p], lr=0.1)
    opt.step()  # no gradient: nothing to do
    p.grad = verigrad.ones(3)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()
    np.testing.assert_array_equal(p.numpy(), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"Invalid learning rate: 0\.0"):
        optim.SparseAdam([p], lr=0.0)


# CyclicLR -------------------------------------------------------------------------------------------


def test_cyclic_lr_triangle_and_momentum_the_other_way() -> None:
    p = verigrad.zeros(2, requires_grad=True)
    opt = optim.SGD([p], lr=1.0, momentum=0.5)
    schedule = optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2, step_size_down=4,
                                           mode="triangular2")  # fmt: skip
    lrs, momenta = [], []
    for _ in range(13):
        lrs.append(schedule.get_last_lr()[0])
        momenta.append(opt.param_groups[0]["momentum"])
        opt.step()
        schedule.step()
    expected = [0.1, 0.3, 0.5, 0.4, 0.3, 0.2, 0.1, 0.2, 0.3, 0.25, 0.2, 0.15, 0.1]  # halved 2nd cycle
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert momenta[0] == 0.9 and momenta[2] == pytest.approx(0.8) and momenta[8] == pytest.approx(0.85)
    assert float(opt.param_groups[0].lr.item()) == schedule.get_last_lr()[0]  # the tensor compiled steps read
    with pytest.raises(ValueError, match="scale_mode must be 'cycle' or 'iterations'"):
        optim.lr_scheduler.CyclicLR(opt, 0.1, 0.5, scale_fn=lambda x: 1.0, scale_mode="epoch")


# linalg and init ----------------------------------------------------------------------------------


def test_lstsq_drivers_by_hand() -> None:
    a = verigrad.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=verigrad.float64)
    b = verigrad.tensor([[1.0], [2.0], [3.0]], dtype=verigrad.float64)
    gelsd = verigrad.linalg.lstsq(a, b, driver="gelsd")
    np.testing.assert_allclose(gelsd.solution.numpy(), [[1.0], [2.0]], atol=1e-15)
    np.testing.assert_allclose(gelsd.residuals.numpy(), [9.0])  # the third row, unreachable
    np.testing.assert_allclose(gelsd.singular_values.numpy(), [1.0, 1.0])
    assert int(gelsd.rank) == 2
    gels = verigrad.linalg.lstsq(a, b, driver="gels")
    assert gels.rank.shape == (0,) and gels.singular_values.shape == (0,) and gels.residuals.shape == (1,)
    assert verigrad.linalg.lstsq(a, b).residuals.shape == (0,)  # gelsy: never
    deficient = verigrad.tensor([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]], dtype=verigrad.float64)
    assert verigrad.linalg.lstsq(deficient, b, driver="gelss").residuals.shape == (0,)


def test_lstsq_residuals_in_a_trace_are_refused_where_they_depend_on_values() -> None:
    a, b = verigrad.randn(4, 2, dtype=verigrad.float64), verigrad.randn(4, 1, dtype=verigrad.float64)
    with pytest.raises(NotImplementedError, match=r"driver='gelsd'.* in a trace"):
        verigrad.compile(lambda a, b: verigrad.linalg.lstsq(a, b, driver="gelsd").solution)(a, b)


def test_pinv_hermitian_reads_the_lower_triangle() -> None:
    lower = np.array([[2.0, 0.0], [1.0, 3.0]])
    symmetric = np.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(
        verigrad.linalg.pinv(verigrad.tensor(lower), hermitian=True).numpy(), np.linalg.inv(symmetric), 1e-14
    )
    singular = verigrad.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=verigrad.float64)
    np.testing.assert_array_equal(verigrad.linalg.pinv(singular, hermitian=True).numpy(), [[1, 0], [0, 0]])


def test_dirac_passes_channels_through() -> None:
    w = verigrad.nn.init.dirac_(verigrad.empty(4, 2, 3), groups=2)
    expected = np.zeros((4, 2, 3), np.float32)
    expected[0, 0, 1] = expected[1, 1, 1] = expected[2, 0, 1] = expected[3, 1, 1] = 1
    np.testing.assert_array_equal(w.numpy(), expected)
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        verigrad.nn.init.dirac_(verigrad.empty(3, 2, 3), groups=2)


# packed sequences ---------------------------------------------------------------------------------


def test_packing_by_hand() -> None:
    from verigrad.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

    x = verigrad.tensor([[1.0, 10.0, 100.0], [2.0, 20.0, 0.0], [0.0, 30.0, 0.0]])  # [T=3, B=3]
    packed = pack_padded_sequence(x, [2, 3, 1], enforce_sorted=False)
    assert isinstance(packed, PackedSequence) and isinstance(packed, tuple)
    np.testing.assert_array_equal(packed.data.numpy(), [10, 1, 100, 20, 2, 30])
    assert packed.batch_sizes.tolist() == [3, 2, 1] and packed.sorted_indices.tolist() == [1, 0, 2]
    padded, lengths = pad_packed_sequence(packed, batch_first=True, padding_value=-1)
    np.testing.assert_array_equal(padded.numpy(), [[1, 2, -1], [10, 20, 30], [100, -1, -1]])
    assert lengths.tolist() == [2, 3, 1]
    assert packed.double().data.dtype is verigrad.float64


def test_a_finished_sequence_keeps_its_state() -> None:
    """A packed batch's final state of each sequence is the state after its own last step: the same as
    running that sequence alone, and the outputs past its end are zeros when padded again."""
    from verigrad.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    verigrad.manual_seed(0)
    gru = nn.GRU(2, 3, bidirectional=True, dtype="f64")
    x = verigrad.randn(5, 2, 2, dtype=verigrad.float64)
    out, h = gru(pack_padded_sequence(x, [5, 2]))
    alone_out, alone_h = gru(x[:2, 1:2])
    np.testing.assert_allclose(h[:, 1:2].numpy(), alone_h.numpy(), rtol=1e-14)
    padded, _ = pad_packed_sequence(out)
    np.testing.assert_allclose(padded[:2, 1:2].numpy(), alone_out.numpy(), rtol=1e-14)
    np.testing.assert_array_equal(padded[2:, 1].numpy(), 0.0)


# MultiheadAttention -------------------------------------------------------------------------------


def test_multihead_attention_with_other_key_and_value_widths() -> None:
    mha = nn.MultiheadAttention(6, 2, kdim=4, vdim=3, add_bias_kv=True, add_zero_attn=True)
    shapes = {k: tuple(v.shape) for k, v in mha.state_dict().items()}
    assert shapes == {
        "q_proj_weight": (6, 6),
        "k_proj_weight": (6, 4),
        "v_proj_weight": (6, 3),
        "in_proj_bias": (18,),
        "bias_k": (1, 1, 6),
        "bias_v": (1, 1, 6),
        "out_proj.weight": (6, 6),
        "out_proj.bias": (6,),
    }
    assert mha.in_proj_weight is None
    out, weights = mha(verigrad.randn(5, 2, 6), verigrad.randn(7, 2, 4), verigrad.randn(7, 2, 3))
    assert out.shape == (5, 2, 6) and weights.shape == (2, 5, 9)  # 7 keys, the bias one, the zero one
    np.testing.assert_allclose(weights.sum(-1).numpy(), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(0, 1)


# AdaptiveLogSoftmaxWithLoss and LinearCrossEntropyLoss --------------------------------------------


def test_adaptive_log_softmax_is_a_distribution_over_the_classes() -> None:
    verigrad.manual_seed(0)
    asm = nn.AdaptiveLogSoftmaxWithLoss(8, 12, [3, 7], div_value=2.0, dtype="f64")
    x = verigrad.randn(5, 8, dtype=verigrad.float64)
    log_prob = asm.log_prob(x)
    np.testing.assert_allclose(np.exp(log_prob.numpy()).sum(1), 1.0, rtol=1e-12)
    targets = verigrad.tensor([0, 11, 4, 2, 8])
    out, loss = asm(x, targets)
    picked = log_prob.numpy()[np.arange(5), targets.numpy()]
    np.testing.assert_allclose(out.numpy(), picked, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), -picked.mean(), rtol=1e-12)
    np.testing.assert_array_equal(asm.predict(x).numpy(), log_prob.numpy().argmax(1))


def test_linear_cross_entropy_is_linear_then_cross_entropy() -> None:
    verigrad.manual_seed(0)
    loss = nn.LinearCrossEntropyLoss(4, 6, bias=True, label_smoothing=0.2)
    x, target = verigrad.randn(3, 4), verigrad.tensor([0, 5, 2])
    expected = nn.functional.cross_entropy(loss.linear(x), target, label_smoothing=0.2)
    np.testing.assert_allclose(loss(x, target).item(), expected.item(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="expected weight shape to be"):
        nn.LinearCrossEntropyLoss(4, 6, weight=verigrad.ones(5))


def test_cat_skips_a_legacy_empty_tensor() -> None:
    x = verigrad.ones(2, 3)
    np.testing.assert_array_equal(verigrad.cat([verigrad.tensor([]), x]).numpy(), x.numpy())
    assert verigrad.cat([verigrad.zeros(0, dtype=verigrad.float64), x]).dtype is verigrad.float64
    assert verigrad.concat(x, x, axis=1).shape == (2, 6)  # verigrad's own form, as before


def test_packing_in_a_trace_is_refused_clearly() -> None:
    from verigrad.nn.utils.rnn import pack_padded_sequence

    lstm = nn.LSTM(2, 3)

    def last_state(x: verigrad.Tensor) -> verigrad.Tensor:
        _, (h, _) = lstm(pack_padded_sequence(x, [4, 2]))
        return h.sum()

    x = verigrad.randn(4, 2, 2)
    assert np.isfinite(last_state(x).item())
    with pytest.raises(NotImplementedError, match="PackedSequence in a trace"):
        verigrad.compile(last_state)(x)


def test_spectral_norm_divides_by_the_largest_singular_value() -> None:
    verigrad.manual_seed(0)
    layer = nn.utils.spectral_norm(nn.Linear(6, 4, dtype="f64"), n_power_iterations=30)
    layer(verigrad.randn(2, 6, dtype=verigrad.float64))
    sigma = np.linalg.svd(layer.weight_orig.numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(layer.weight.detach().numpy(), layer.weight_orig.numpy() / sigma, rtol=1e-10)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        nn.utils.spectral_norm(layer)
    nn.utils.remove_spectral_norm(layer)
    assert [n for n, _ in layer.named_parameters()] == ["bias", "weight"]


def test_averaged_model_is_the_mean_of_the_snapshots() -> None:
    model = nn.Linear(2, 2, dtype="f64")
    average = optim.swa_utils.AveragedModel(model)
    snapshots = []
    for k in range(3):
        with verigrad.no_grad():
            model.weight.copy_(verigrad.full((2, 2), float(k * k), dtype=verigrad.float64))
        average.update_parameters(model)
        snapshots.append(model.weight.numpy().copy())
    np.testing.assert_allclose(average.module.weight.numpy(), np.mean(snapshots, 0), rtol=1e-15)
    assert int(average.n_averaged) == 3
    x = verigrad.ones(1, 2, dtype=verigrad.float64)
    np.testing.assert_allclose(average(x).detach().numpy(), average.module(x).detach().numpy())
