"""The normal and Student t functions taken from scipy.special give scipy.stats' bits:
the models' truths and Jacobians and the critical values of stores written with
scipy.stats stay what they were."""

import numpy as np
from scipy import stats

from ldpsim.tasks.intervals.critical_values import student_t_quantile
from ldpsim.tasks.normal import normal_cdf, normal_pdf, normal_ppf

#: Quantile levels: the taus of the built-in sweeps, the two-sided levels of 80-99%
#: intervals, and a spread of others.
LEVELS = [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.995, 1e-9, 1 - 1e-9]


def test_normal_functions_equal_scipy_stats():
    probs = np.concatenate([LEVELS, np.random.default_rng(0).random(2000)])
    for prob in probs:
        z = normal_ppf(float(prob))
        assert z == stats.norm.ppf(prob)
        assert normal_pdf(z) == stats.norm.pdf(z)
        assert normal_cdf(z) == stats.norm.cdf(z)
    assert normal_pdf(1.0) == stats.norm.pdf(1.0) and normal_cdf(1.0) == stats.norm.cdf(1.0)


def test_student_t_quantile_equals_scipy_stats():
    for df in [*range(1, 80), 100, 1000, 10**6]:
        for prob in (0.9, 0.95, 0.975, 0.995, (1 + 0.9 ** (1 / 4)) / 2):
            assert student_t_quantile(prob, df) == stats.t.ppf(prob, df)
