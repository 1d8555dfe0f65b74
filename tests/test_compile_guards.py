"""A compiled call sees every change of what its trace read from modules before it runs again (the
module guards are read again only after nn.Module's counter of changes moved: `ir/guards.py`)."""

import numpy as np

import verigrad as vg
import verigrad.nn as nn
from verigrad.ir import guards


class Mode(nn.Module):
    """Doubles in training mode, triples in eval mode."""

    def forward(self, x):
        return x * (2.0 if self.training else 3.0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Mode()

    def forward(self, x):
        return self.inner(x) + 1.0


def _x():
    return vg.tensor(np.arange(3, dtype=np.float32))


def _same(f, model, x):
    """The compiled call gives the eager result, at its first call after a change and after that."""
    eager = model(x).tolist()
    assert f(x).tolist() == eager
    assert f(x).tolist() == eager


def test_training_assigned_to_the_module_and_to_a_nested_one():
    net, x = Net(), _x()
    f = vg.compile(lambda x: net(x))
    _same(f, net, x)
    net.inner.training = False  # the nested module alone, by assignment
    _same(f, net, x)
    net.inner.training = True
    _same(f, net, x)
    assert f.counts["traces"] == 2  # the first program is found again


def test_eval_and_train():
    net, x = Net(), _x()
    f = vg.compile(lambda x: net(x))
    _same(f, net, x)
    net.eval()
    _same(f, net, x)
    net.train()
    _same(f, net, x)


def test_a_replaced_submodule():
    net, x = Net(), _x()
    f = vg.compile(net)
    _same(f, net, x)
    replaced = Mode()
    replaced.training = False
    net.inner = replaced
    _same(f, net, x)


def test_a_module_that_dies_without_any_attribute_set():
    layers, x = [Mode()], _x()  # a list the function reads: replacing its item sets no module attribute
    f = vg.compile(lambda x: layers[0](x))
    _same(f, layers[0], x)
    other = Mode()
    object.__setattr__(other, "training", False)  # no counter moves here
    before = guards.MODULES_CHANGED[0]
    layers[0] = other  # the old module dies: its guard reads nothing now
    assert guards.MODULES_CHANGED[0] != before
    _same(f, layers[0], x)


def test_hooks_added_and_removed_by_their_handle():
    net, x = Net(), _x()
    f = vg.compile(net)
    plain = f(x).tolist()
    handle = net.inner.register_forward_hook(lambda module, args, out: out * 0)
    assert f(x).tolist() == f(x).tolist() == [1.0] * 3
    handle.remove()
    assert f(x).tolist() == f(x).tolist() == plain


class OwnState(Mode):
    """A module whose traced state is its own (read from its __dict__ directly): the counter does not
    cover it, so its guard is read at every call."""

    def __init__(self):
        super().__init__()
        self.__dict__["scale"] = 2.0

    @property
    def _traced_state(self):
        return (self.training, self.__dict__["scale"])

    def forward(self, x):
        return x * self.__dict__["scale"]


def test_a_traced_state_of_its_own_is_read_at_every_call():
    layer, x = OwnState(), _x()
    f = vg.compile(layer)
    _same(f, layer, x)
    layer.__dict__["scale"] = 5.0  # around nn.Module's API: no counter moves
    _same(f, layer, x)


def test_unchanged_module_guards_are_not_read_again(monkeypatch):
    net, x = Net(), _x()
    f = vg.compile(lambda x: net(x))
    f(x)
    program = f.program(x)
    reads = []
    read = guards.ModuleState.__call__
    monkeypatch.setattr(guards.ModuleState, "__call__", lambda self: reads.append(self) or read(self))
    assert program.holds() and program.holds()
    assert reads == []
    net.inner.training = True  # the same value, but set: read again, once
    assert program.holds() and program.holds()
    assert len(reads) == 2  # net's and net.inner's


class Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Scale(2.0)

    def forward(self, x):
        return self.inner(x) + 1.0


def test_a_number_assigned_to_a_module_attribute():
    net, x = Outer(), _x()
    f = vg.compile(lambda x: net(x))
    _same(f, net, x)
    net.inner.k = 7.0  # read by forward as a Python number: a constant of the program
    _same(f, net, x)
    norm = nn.LayerNorm(3)
    g = vg.compile(lambda x: norm(x))
    _same(g, norm, x)
    norm.eps = 0.5
    _same(g, norm, x)


def test_a_replaced_submodule_that_stays_alive():
    net, x = Outer(), _x()
    f = vg.compile(lambda x: net(x))
    _same(f, net, x)
    kept = net.inner  # alive: its own guards still read what they read
    net.inner = Scale(5.0)
    _same(f, net, x)
    net.inner = kept
    _same(f, net, x)
    assert f.counts["traces"] == 2
