"""models/answer_loss.py: the loss on the answer rows alone (their logits alone made) against the logits of
every row, eagerly and in a compiled step."""

from __future__ import annotations

import numpy as np
import pytest
from llama_gguf import write_llama_gguf

import verigrad as vg
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.cli.train_loop import accumulated_step
from verigrad.models.answer_loss import answer_loss
from verigrad.models.llama import Llama
from verigrad.models.lora import TARGETS, add_lora, to_f32
from verigrad.nn import functional as F

IGNORE = -100


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("answer")
    return {tied: write_llama_gguf(folder / f"tied{tied}.gguf", tied=tied) for tied in (True, False)}


def every_row(model, ids, targets):
    logits = model(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)


def model_of(path, full):
    vg.manual_seed(0)
    model = Llama.from_gguf(path, activations="f32")
    if full:
        return to_f32(model)
    model = add_lora(model, TARGETS, 4, 8.0)
    rng = np.random.default_rng(0)
    with vg.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("lora_B"):  # B = 0 would leave A without gradient
                p.assign(vg.from_numpy(rng.normal(0, 0.05, p.shape).astype(np.float32)))
    return model


def batch(b, t, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, 270, (b, t))
    targets = np.roll(ids, -1, axis=1)
    targets[:, : t // 2] = IGNORE
    targets[-1, -1] = IGNORE
    return ids, targets


def loss_and_grads(path, full, fn, ids, targets):
    model = model_of(path, full)
    loss = fn(model, vg.from_numpy(ids), vg.from_numpy(targets))
    loss.backward()
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.requires_grad}
    return float(loss), grads


@pytest.mark.parametrize("full", [False, True], ids=["lora", "full"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("shape", [(2, 24), (1, 8)])
def test_the_answer_rows_give_every_rows_loss_and_gradients_bit_for_bit(models, tied, full, shape):
    """With the exact products (each element's bits independent of the product's row count; the fast
    path's depend on the shape, within its stated tolerance) the loss and every gradient are the same
    bits as the logits of every row give."""
    ids, targets = batch(*shape)
    with cpu_matmul.exact_mode():
        expected, theirs = loss_and_grads(models[tied], full, every_row, ids, targets)
        loss, ours = loss_and_grads(models[tied], full, answer_loss_, ids, targets)
    assert loss == expected
    assert ours.keys() == theirs.keys()
    for name, g in theirs.items():
        np.testing.assert_array_equal(ours[name], g, err_msg=name)


def answer_loss_(model, ids, targets):
    return answer_loss(model, ids, targets, IGNORE)


@pytest.mark.parametrize("full", [False, True], ids=["lora", "full"])
def test_a_compiled_step_reads_the_rows_that_count_at_each_call(models, full):
    """Which rows count is data: a compiled step's loss and update follow each call's targets, as the
    eager step's do (the same bits)."""
    ids, targets = batch(2, 24)
    other = targets.copy()
    other[0, 3:9] = ids[0, 4:10]  # more rows count
    other[1, 15:] = IGNORE  # fewer
    results = {}
    for way in ("eager", "compiled"):
        model = model_of(models[True], full)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = vg.optim.AdamW(params, lr=1e-2)
        step = accumulated_step(lambda x, y, m=model: answer_loss(m, x, y, IGNORE), params, optimizer, 1.0)
        step = vg.compile(step) if way == "compiled" else step
        losses = [float(step(vg.from_numpy(ids[None]), vg.from_numpy(t[None]))) for t in (targets, other) * 2]
        results[way] = losses, [p.numpy().copy() for p in params]
    assert results["compiled"][0] == results["eager"][0]
    assert results["compiled"][0][0] != results["compiled"][0][1]
    for ours, theirs in zip(results["compiled"][1], results["eager"][1]):
        np.testing.assert_array_equal(ours, theirs)
    with cpu_matmul.exact_mode():
        expected = [loss_and_grads(models[True], full, every_row, ids, t)[0] for t in (targets, other)]
        first = [loss_and_grads(models[True], full, answer_loss_, ids, t)[0] for t in (targets, other)]
    assert first == expected


def test_no_answer_row_gives_the_same_nan_and_zero_gradients(models):
    ids, targets = batch(1, 20)
    targets[:] = IGNORE
    expected, theirs = loss_and_grads(models[True], False, every_row, ids, targets)
    loss, ours = loss_and_grads(models[True], False, answer_loss_, ids, targets)
    assert np.isnan(loss) and np.isnan(expected)
    for name, g in theirs.items():
        np.testing.assert_array_equal(ours[name], g, err_msg=name)
