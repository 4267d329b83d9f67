"""Paired statistics for A/B accuracy runs on the same questions.

Inputs are per-question outcomes: a sequence of 0/1 (1 = correct), index i of run A and index i of run B
being the same question. Nothing here depends on lm-eval or torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class Proportion:
    """Accuracy of one run: `mean` of n 0/1 outcomes and its standard error sqrt(p(1-p)/(n-1))."""

    n: int
    correct: int
    mean: float
    stderr: float


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on the discordant pairs.

    b = A right and B wrong, c = A wrong and B right. Under H0 (same accuracy) b ~ Binomial(b + c, 1/2).
    `p_exact` is the two-sided exact binomial p-value (min(1, 2 * P[X <= min(b, c)])), `p_chi2` the
    continuity-corrected chi-square p-value (max(|b - c| - 1, 0)^2 / (b + c), 1 dof); both are 1.0 when b + c == 0.
    """

    b: int
    c: int
    statistic: float
    p_exact: float
    p_chi2: float


@dataclass(frozen=True)
class PairedComparison:
    """A vs B on the same n questions: both accuracies, the difference A - B and its paired stderr."""

    a: Proportion
    b: Proportion
    diff: float
    diff_stderr: float
    mcnemar: McNemar

    def to_dict(self) -> dict:
        return asdict(self)


def _check_outcomes(name: str, outcomes: Sequence[int]) -> list[int]:
    values = [int(x) for x in outcomes]
    bad = [x for x in values if x not in (0, 1)]
    if bad:
        raise ValueError(f"{name} must hold only 0/1 outcomes, got {bad[:5]}")
    return values


def proportion(outcomes: Sequence[int]) -> Proportion:
    """Mean and sample standard error (n - 1 denominator, as lm-eval's `mean_stderr`)."""
    values = _check_outcomes("outcomes", outcomes)
    n = len(values)
    if n == 0:
        raise ValueError("outcomes must hold at least one outcome, got 0")
    k = sum(values)
    p = k / n
    se = math.sqrt(p * (1.0 - p) / (n - 1)) if n > 1 else float("nan")
    return Proportion(n=n, correct=k, mean=p, stderr=se)


def _binom_cdf_half(k: int, n: int) -> float:
    """P[X <= k] for X ~ Binomial(n, 1/2), exact through integer arithmetic."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2**n


def sign_test(wins: int, total: int) -> float:
    """Two-sided exact sign test: P of a split at least as uneven as wins / total - wins under p = 1/2."""
    if not 0 <= wins <= total:
        raise ValueError(f"wins must be in [0, total={total}], got {wins}")
    if total == 0:
        return 1.0
    return min(1.0, 2.0 * _binom_cdf_half(min(wins, total - wins), total))


def mcnemar(a: Sequence[int], b: Sequence[int]) -> McNemar:
    """McNemar's paired test of two 0/1 outcome vectors over the same questions."""
    xs = _check_outcomes("a", a)
    ys = _check_outcomes("b", b)
    if len(xs) != len(ys):
        raise ValueError(f"a and b must have the same length (paired questions), got {len(xs)} and {len(ys)}")
    n01 = sum(1 for x, y in zip(xs, ys) if x == 1 and y == 0)
    n10 = sum(1 for x, y in zip(xs, ys) if x == 0 and y == 1)
    m = n01 + n10
    if m == 0:
        return McNemar(b=n01, c=n10, statistic=0.0, p_exact=1.0, p_chi2=1.0)
    p_exact = sign_test(n01, m)
    stat = max(abs(n01 - n10) - 1, 0) ** 2 / m
    # chi-square with 1 dof: survival = erfc(sqrt(stat / 2))
    p_chi2 = math.erfc(math.sqrt(stat / 2.0))
    return McNemar(b=n01, c=n10, statistic=stat, p_exact=p_exact, p_chi2=p_chi2)


def compare(a: Sequence[int], b: Sequence[int]) -> PairedComparison:
    """Accuracy of A and B, the difference A - B with its paired standard error, and McNemar's test.

    Paired stderr of the difference: the sample stderr of d_i = a_i - b_i (n - 1 denominator).
    """
    pa, pb = proportion(a), proportion(b)
    if pa.n != pb.n:
        raise ValueError(f"a and b must have the same length (paired questions), got {pa.n} and {pb.n}")
    d = [int(x) - int(y) for x, y in zip(a, b)]
    n = len(d)
    mean_d = sum(d) / n
    var_d = sum((x - mean_d) ** 2 for x in d) / (n - 1) if n > 1 else float("nan")
    se_d = math.sqrt(var_d / n) if n > 1 else float("nan")
    return PairedComparison(a=pa, b=pb, diff=mean_d, diff_stderr=se_d, mcnemar=mcnemar(a, b))
