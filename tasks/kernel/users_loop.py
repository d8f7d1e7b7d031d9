"""Replays of a replicate's users: the template of the competitors' compiled loops.

Like :mod:`ldpsim.tasks.kernel.sgd_loop`, this file is a template: :func:`ldpsim.tasks.users`
fills the ``<bindings>`` block with one model's and one mechanism's callbacks and
compiles it through :mod:`ldpsim.tasks.kernel.cache`. Both functions walk the
data-and-noise stream of the LDP run draw for draw (each user's observation, then that
user's privacy noise, which they skip), so they see the LDP run's users.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ldpsim.tasks.streams.rng import standard_exponential

# <bindings> The generated module replaces these lines (ldpsim.tasks.kernel.cache).
sample_gradient = sample_observation = privatize = project = None
d = n_model_params = n_mech_params = 1
cache_to_disk = False
# </bindings>


@njit(error_model="numpy", nogil=True, cache=cache_to_disk)
def observations(model_params, mech_params, n_users, st):
    """The raw data of the first ``n_users`` users of the stream ``st``, (n_users, d).

    Each user's observation is drawn by the model's ``sample_observation`` (the draws of
    its ``sample_gradient``); the user's privacy noise is drawn by ``privatize`` and
    dropped, so the stream stays where the LDP run had it. ``st`` is advanced in place.
    """
    x = np.empty((n_users, d))
    g = np.zeros(d)
    state = (st[0], st[1], st[2], st[3])
    for i in range(n_users):
        state = sample_observation(d, model_params, state, x[i])
        state = privatize(d, g, mech_params, state)
    st[0], st[1] = state[0], state[1]
    return x


@njit(error_model="numpy", nogil=True, cache=cache_to_disk)
def chains(
    model_params,
    mech_params,
    chain_mech_params,
    theta0,
    c,
    gamma,
    batch,
    n,
    n_chains,
    st,
    noise_st,
):
    """Fang, Xu & Yang's online bootstrap: ``n_chains`` SGD chains over the same users.

    Step i: eta_i = c i^-gamma; every chain b sees the same ``batch`` users (each
    user's observation redrawn from the state saved before the LDP run drew it), takes
    their gradients at its own theta_b, privatizes each with ``chain_mech_params``
    (noise from ``noise_st``) and steps theta_b -= eta_i W_b ghat_b, with W_0 = 1 and
    W_b ~ Exp(1) for b >= 1 (from ``noise_st``). Returns the averages theta_bar_b,
    shape (n_chains, d). ``st`` (the LDP run's stream, whose noise draws are skipped
    with ``mech_params``) and ``noise_st`` are advanced in place.
    """
    theta = np.empty((n_chains, d))
    total = np.zeros((n_chains, d))
    for b in range(n_chains):
        for j in range(d):
            theta[b, j] = theta0[j]
    g = np.empty(d)
    gsum = np.empty(d)
    users = np.empty((batch, 4), dtype=np.uint64)
    state = (st[0], st[1], st[2], st[3])
    noise = (noise_st[0], noise_st[1], noise_st[2], noise_st[3])
    for i in range(1, n + 1):
        eta = c * float(i) ** (-gamma)
        for k in range(batch):
            users[k, 0], users[k, 1], users[k, 2], users[k, 3] = state
            state = sample_gradient(d, theta[0], model_params, state, g)
            state = privatize(d, g, mech_params, state)  # the LDP run's noise: skipped
        for b in range(n_chains):
            for j in range(d):
                gsum[j] = 0.0
            for k in range(batch):
                user = (users[k, 0], users[k, 1], users[k, 2], users[k, 3])
                user = sample_gradient(d, theta[b], model_params, user, g)
                noise = privatize(d, g, chain_mech_params, noise)
                for j in range(d):
                    gsum[j] += g[j]
            weight = 1.0
            if b > 0:
                weight, noise = standard_exponential(noise)
            step = eta * weight / batch
            for j in range(d):
                theta[b, j] = project(d, j, theta[b, j] - step * gsum[j], model_params)
                total[b, j] += theta[b, j]
    st[0], st[1] = state[0], state[1]
    noise_st[0], noise_st[1] = noise[0], noise[1]
    return total / n
