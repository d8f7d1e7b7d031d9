"""The state check of tasks/callback_check.py on its own (the compiled probes are in
tests/tasks/test_plugins.py): which callbacks hand back a random state they drew from."""

from __future__ import annotations

import numpy as np

from ldpsim.tasks.callback_check import PROBES, _states, reuses_state


def test_a_callback_that_hands_back_its_state_on_some_draws_only_is_refused():
    # A callback whose results vary with the state drew from it; it must return a moved
    # state from every call, not only most (mutation hunt h19f: only callbacks that
    # kept every state were tested).
    states = _states(PROBES)
    assert len({row.tobytes() for row in states}) == PROBES  # the probes differ
    varying = np.arange(PROBES, dtype=np.float64)[:, None]
    moved = states + np.uint64(1)
    once = moved.copy()
    once[3] = states[3]
    assert reuses_state(varying, states, once)
    assert reuses_state(varying, states, states)
    assert not reuses_state(varying, states, moved)
    # One word of the state moved (a draw changes the low word alone) is a moved state.
    low = states.copy()
    low[:, 1] += np.uint64(1)
    assert not reuses_state(varying, states, low)
    # A callback that draws nothing computes the same from every state and keeps it.
    assert not reuses_state(np.zeros((PROBES, 2)), states, states)


def test_a_callback_is_blamed_on_the_unit_whose_role_it_has():
    # A model's projection is the model's callback; where numba names no callback, the
    # pair's plugins are blamed, or both units when neither is a plugin (mutation hunt
    # h19f: no test named the unit of 'project' or of no role).
    from dataclasses import dataclass

    from ldpsim.tasks.callback_check import _culprits
    from ldpsim.tasks.mechanisms.laplace import Laplace
    from ldpsim.tasks.models.quantile import Quantile

    model, mechanism = Quantile(), Laplace(eps=1.0)
    own = "The model 'quantile' (ldpsim.tasks.models.quantile.Quantile)"
    noise = "The mechanism 'laplace' (ldpsim.tasks.mechanisms.laplace.Laplace)"
    assert _culprits("project", model, mechanism) == own
    assert _culprits("sample_gradient", model, mechanism) == own
    assert _culprits("privatize", model, mechanism) == noise
    assert _culprits(None, model, mechanism) == f"{own} or {noise}"

    @dataclass(frozen=True, kw_only=True)
    class MyNoise(Laplace):
        name = "my_noise"

    mine = f"The mechanism 'my_noise' ({MyNoise.__module__}.{MyNoise.__qualname__})"
    assert _culprits(None, model, MyNoise(eps=1.0)) == mine


def test_a_sweep_of_built_in_units_has_no_kernel_to_check():
    from ldpsim.tasks.callback_check import check_plugin_callbacks, is_plugin
    from ldpsim.tasks.mechanisms.none import NoPrivacy
    from ldpsim.tasks.spec import normalize_spec

    point = normalize_spec(
        {"model": "quantile", "mechanism": "none", "n": 1000, "methods": {"oracle": {}}}
    )
    assert not is_plugin("mechanism", type(point.mechanism))
    assert check_plugin_callbacks([point, point]) == 0
    assert check_plugin_callbacks([]) == 0
    assert is_plugin("model", NoPrivacy)  # not one of the built-in models


def test_a_kernel_failure_of_built_in_units_names_both_by_their_classes():
    # Numba stopped in the kernel's own code (no callback's role) and neither unit is a
    # plugin: both are named, each with its class, rather than none.
    from ldpsim.tasks.callback_check import _culprits
    from ldpsim.tasks.spec import normalize_spec

    point = normalize_spec(
        {"model": "quantile", "mechanism": "none", "n": 1000, "methods": {"oracle": {}}}
    )
    model, mechanism = type(point.model), type(point.mechanism)
    assert _culprits(None, point.model, point.mechanism) == (
        f"The model 'quantile' ({model.__module__}.{model.__qualname__}) or "
        f"The mechanism 'none' ({mechanism.__module__}.{mechanism.__qualname__})"
    )
    assert _culprits("privatize", point.model, point.mechanism).startswith("The mechanism 'none'")
