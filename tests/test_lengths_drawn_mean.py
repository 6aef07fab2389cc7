"""lognormal lengths: ``mean=`` (untruncated) against ``drawn_mean=`` (the mean after the cap),
checked against the truncated lognormal's closed-form mean, computed here independently."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.analysis.workload import parse_lengths
from roofline.errors import SpecError


def _phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def truncated_mean(mu: float, s: float, a: float, b: float) -> float:
    """E[X | a <= X <= b] for log X ~ N(mu, s²): e^(mu+s²/2)·ΔΦ(shifted by s²) / ΔΦ."""
    za, zb = (math.log(a) - mu) / s, (math.log(b) - mu) / s
    return math.exp(mu + s * s / 2) * (_phi(zb - s) - _phi(za - s)) / (_phi(zb) - _phi(za))


def clipped_mean(mu: float, s: float, b: float) -> float:
    """E[min(X, b)]: what a cap that clips (rather than redraws) would give."""
    zb = (math.log(b) - mu) / s
    return math.exp(mu + s * s / 2) * _phi(zb - s) + b * (1 - _phi(zb))


def test_untruncated_mean_is_cut_by_the_cap_as_the_closed_form_says():
    # the vllm_azure spec until session 30: "lognormal:213,1.0,1024"
    L = parse_lengths("lognormal:213,1.0,1024")
    assert L.mu == pytest.approx(math.log(213) - 0.5)
    want = truncated_mean(L.mu, 1.0, 0.5, 1024.5)  # rounding keeps draws in [0.5, 1024.5)
    assert L.mean() == pytest.approx(want, rel=2e-3)
    assert 184 < want < 189  # drawn about 12 % short of 213
    # the sampler redraws (truncates); clipping would give a higher mean
    assert clipped_mean(L.mu, 1.0, 1024) > want + 10
    x = L.sample(100_000, np.random.default_rng(1))
    assert x.mean() == pytest.approx(want, abs=4 * x.std() / math.sqrt(len(x)))


@pytest.mark.parametrize("target,sigma,cap", [(213.3, 1.0, 1024), (213.7, 1.5, 1024),
                                              (3000, 0.8, 8192), (50, 2.0, 200)])
def test_drawn_mean_is_the_mean_after_the_cap(target, sigma, cap):
    L = rl.lengths("lognormal", drawn_mean=target, sigma=sigma, max=cap)
    assert L.mean() == pytest.approx(target, rel=1e-4)
    assert truncated_mean(L.mu, sigma, 0.5, cap + 0.5) == pytest.approx(target, rel=3e-3)
    x = L.sample(200_000, np.random.default_rng(0))
    assert x.max() <= cap and x.min() >= 1
    assert x.mean() == pytest.approx(target, abs=4 * x.std() / math.sqrt(len(x)))


def test_keyword_spec_is_the_call():
    a = parse_lengths("lognormal:drawn_mean=213.3,sigma=1.0,max=1024")
    b = rl.lengths("lognormal", drawn_mean=213.3, sigma=1.0, max=1024)
    assert a == b and a.max == 1024
    c = parse_lengths("lognormal:mean=213, sigma=1.0, max=1024")
    assert c == parse_lengths("lognormal:213,1.0,1024")
    assert parse_lengths("lognormal:median=150,sigma=0.5").mu == pytest.approx(math.log(150))


@pytest.mark.parametrize("call,field", [
    (lambda: rl.lengths("lognormal", mean=1024, sigma=1.0, max=1024), "mean"),
    (lambda: rl.lengths("lognormal", drawn_mean=2000, sigma=1.0, max=1024), "drawn_mean"),
    (lambda: rl.lengths("lognormal", median=5000, sigma=1.0, max=1024), "median"),
    (lambda: rl.lengths("lognormal", drawn_mean=1, sigma=1.0, max=1024), "drawn_mean"),
    (lambda: rl.lengths("lognormal", drawn_mean=100, sigma=0, max=1024), "sigma"),
    (lambda: rl.lengths("lognormal", drawn_mean=100, sigma=-1.0, max=1024), "sigma"),
    (lambda: rl.lengths("lognormal", mean=100, drawn_mean=100, sigma=1.0), "exactly one"),
    (lambda: parse_lengths("lognormal:213,0,1024"), "sigma"),
    (lambda: parse_lengths("lognormal:1500,1.0,1024"), "mean"),
    (lambda: parse_lengths("lognormal:drawn_mean=213,sgma=1.0"), "sgma"),
    (lambda: parse_lengths("lognormal:drawn_mean=213,1.0,1024"), "drawn_mean=M"),
    (lambda: parse_lengths("lognormal:drawn_mean=213,sigma=1.0,max=10.5"), "whole tokens"),
])
def test_bad_lognormal_specs_name_the_argument(call, field):
    with pytest.raises(SpecError, match=field):
        call()
