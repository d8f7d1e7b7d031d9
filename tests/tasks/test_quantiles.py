"""Compiled quantiles by selection against numpy's ``np.quantile``, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsim.tasks.quantiles import (
    EXTREMES_FACTOR,
    extreme_counts,
    keep_extremes,
    linear_positions,
    linear_quantiles,
)

PROBS = [
    (0.025, 0.975),  # bb's basic and percentile intervals at 95%
    (0.05, 0.95),  # at 90%
    (0.95,),  # the sup-t band's critical value
    (0.005, 0.995),
    (0.5,),
    (0.0, 0.3, 1.0),
]


def uses_extremes(count: int, probs: tuple[float, ...]) -> bool:
    n_low, n_high = extreme_counts(count, linear_positions(count, probs)[3])
    return max(n_low, n_high) ** 2 <= EXTREMES_FACTOR * count


@pytest.mark.parametrize("count", [1, 2, 3, 7, 200, 500, 2000, 10_000])
@pytest.mark.parametrize("probs", PROBS)
def test_linear_quantiles_equal_numpys(count, probs):
    rng = np.random.default_rng(count)
    draws = np.column_stack(
        [
            rng.standard_normal(count),
            np.round(rng.standard_normal(count), 1),  # many ties
            np.sort(rng.standard_normal(count)),  # ascending: every value enters the buffer
            -np.sort(rng.standard_normal(count)),  # descending
            np.full(count, 2.5),
        ]
    )
    expected = np.quantile(draws, probs, axis=0)
    np.testing.assert_array_equal(linear_quantiles(draws, probs), expected, strict=True)


def test_both_selections_are_exercised():
    # The cases above run through the extremes at bb's quantiles and through
    # quickselect at the median and at large counts.
    assert uses_extremes(2000, (0.025, 0.975)) and uses_extremes(500, (0.95,))
    assert not uses_extremes(500, (0.5,)) and not uses_extremes(10_000, (0.05, 0.95))


def test_a_sample_whose_bound_misses_takes_the_plain_pass():
    # The smallest and the largest values all at the sampled places (every 8th): the
    # bound from the sample then leaves fewer than k values beyond it on either side.
    count = 2000
    order = np.concatenate(
        [np.arange(0, count, 8), np.setdiff1d(np.arange(count), np.arange(0, count, 8))]
    )
    ranks = np.empty(count)
    ranks[order] = np.arange(count, dtype=float)
    values = np.where(np.arange(count) % 8 == 0, ranks, 1e6 + ranks)  # the sampled ones least
    for draws in (values, -values):
        got = linear_quantiles(draws[:, None], (0.025, 0.975))
        np.testing.assert_array_equal(got, np.quantile(draws[:, None], (0.025, 0.975), axis=0))


def test_ranks_two_apart_are_each_selected():
    # Ranks 4999, 5000, 5002, 5003 of 10,000: after 5000, rank 5002 is not the smallest
    # of the rest. Taking it so (a mutation hunt, h16h) passed the cases above, where
    # quickselect had left the neighbours in order by chance; here it does not for some
    # of the samples.
    probs = (0.5, 0.5003)
    assert linear_positions(10_000, probs)[3].tolist() == [4999, 5000, 5002, 5003]
    for seed in range(20):
        draws = np.random.default_rng(seed).standard_normal((10_000, 2))
        expected = np.quantile(draws, probs, axis=0)
        np.testing.assert_array_equal(linear_quantiles(draws, probs), expected, strict=True)


def test_a_nan_gives_nan_in_its_column_only():
    draws = np.random.default_rng(1).standard_normal((500, 3))
    draws[17, 1] = np.nan
    out = linear_quantiles(draws, (0.025, 0.975))
    assert np.isnan(out[:, 1]).all()
    np.testing.assert_array_equal(
        out[:, [0, 2]], np.quantile(draws[:, [0, 2]], (0.025, 0.975), axis=0)
    )


def test_keep_extremes_places_the_order_statistics():
    values = np.random.default_rng(2).permutation(100).astype(float)
    out = np.full(100, -1.0)
    keep_extremes(values, 7, 5, out)
    np.testing.assert_array_equal(out[:7], np.arange(7.0))
    np.testing.assert_array_equal(out[95:], np.arange(95.0, 100.0))
    np.testing.assert_array_equal(out[7:95], -1.0)  # nothing else written
    assert sorted(values) == list(range(100))  # the input unchanged


def test_keep_extremes_stays_inside_out_when_the_ends_fill_it():
    # 297 + 1 of 300 values kept: no room between the ends for the sampled bound.
    values = np.random.default_rng(3).standard_normal(300)
    big = np.full(310, -7.0)
    keep_extremes(values, 297, 1, big[:300])
    np.testing.assert_array_equal(big[300:], -7.0)
    np.testing.assert_array_equal(big[:297], np.sort(values)[:297])
    assert big[299] == values.max()


@pytest.mark.parametrize("count", [1, 2, 7, 500])
def test_every_position_read_lies_inside_the_sample(count):
    # At p = 1 numpy reads the last value twice (its next rank clipped to the sample).
    # Clipped only above count - 1 (a mutation hunt, 2026-12-03, passed the tests
    # above), the next rank was count: a read past the end of the compiled buffer,
    # harmless only while the weight there is 0 and the memory beyond holds a number.
    probs = (0.0, 0.025, 0.5, 0.975, 1.0)
    previous, following, _, selected = linear_positions(count, probs)
    for ranks in (previous, following, selected):
        assert ranks.min() >= 0 and ranks.max() <= count - 1, ranks
    assert previous[-1] == following[-1] == count - 1
    assert previous[0] == 0 and following[0] == min(1, count - 1)


def test_a_bound_tied_by_most_of_the_sample_takes_the_plain_pass():
    # Most values equal the sampled bound, the least ones last: the gathering fills
    # its scratch before it reaches them and must fall back to the plain pass. Taking
    # the values gathered so far instead (a mutation hunt, 2026-12-03) missed them.
    count = 2000
    values = np.zeros(count)
    values[-60:] = -1.0 - np.arange(60.0)
    for draws in (values, -values):
        got = linear_quantiles(draws[:, None], (0.025, 0.975))
        np.testing.assert_array_equal(got, np.quantile(draws[:, None], (0.025, 0.975), axis=0))
