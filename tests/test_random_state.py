"""The generator's state as PyTorch's get_state / set_state and get_rng_state / set_rng_state: restoring
a state continues the same draws; anything else is refused."""

import pytest

import verigrad as vg


def test_a_restored_state_repeats_the_draws():
    vg.manual_seed(5)
    state = vg.get_rng_state()
    first = [vg.rand(4).numpy().tobytes(), vg.randn(2, 3).numpy().tobytes()]
    vg.rand(7)
    vg.set_rng_state(state)
    assert [vg.rand(4).numpy().tobytes(), vg.randn(2, 3).numpy().tobytes()] == first
    assert state.dtype == vg.uint8 and state.ndim == 1


def test_a_generator_of_its_own():
    g = vg.Generator(11)
    state = g.get_state()
    drawn = vg.randn(5, generator=g).numpy().tobytes()
    assert g.set_state(state) is g
    assert vg.randn(5, generator=g).numpy().tobytes() == drawn
    assert g.initial_seed() == 11


@pytest.mark.parametrize("bad", [vg.zeros(4, dtype=vg.uint8), vg.zeros(4), "state"])
def test_what_is_not_a_state_is_refused(bad):
    with pytest.raises((TypeError, ValueError), match="get_state"):
        vg.set_rng_state(bad)


def test_a_negative_seed_is_refused_when_seeded_not_at_the_first_draw():
    """The PCG64 is made at a generator's first draw; a seed it would refuse is refused at once, as before."""
    with pytest.raises(ValueError, match="expected non-negative integer"):
        vg.manual_seed(-1)
    with pytest.raises(ValueError, match="expected non-negative integer"):
        vg.Generator(-2)
