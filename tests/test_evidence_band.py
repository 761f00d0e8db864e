"""The simultaneous band of a curve of paired differences holds the whole true curve together."""

import numpy as np
import pytest

from experiments.evidence import simultaneous_band


def test_band_covers_the_whole_curve_about_95_percent_of_the_time():
    """Over 100 seed sets of correlated settings whose true differences are all 0, the band
    misses somewhere in about 5% of sets (at most 8%); a 95% interval per setting misses
    somewhere in far more (over 15%): the reason for a simultaneous band."""
    rng = np.random.default_rng(5)
    band_misses = pointwise_misses = 0
    for _ in range(100):
        d = 0.7 * rng.normal(size=(20, 1)) + 0.7 * rng.normal(size=(20, 8))
        band = simultaneous_band(d)
        band_misses += not (np.array(band["low"]) <= 0).all() & (np.array(band["high"]) >= 0).all()
        mean, se = d.mean(axis=0), d.std(axis=0, ddof=1) / np.sqrt(20)
        pointwise_misses += not (np.abs(mean) <= 1.96 * se).all()
    assert band_misses / 100 <= 0.08
    assert pointwise_misses / 100 > 0.15


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], [1.0, 2.0], [[np.nan], [1.0]]])
def test_band_refuses_what_is_not_a_seeds_by_settings_array(bad):
    with pytest.raises(ValueError, match="differences must be a finite"):
        simultaneous_band(bad)
