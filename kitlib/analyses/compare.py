"""Did my change make it faster? Repeated step times, compared against their noise.

One step time proves nothing: step times vary (the loader, the allocator, the OS, a new
epoch), and a profiler adds its own cost. Medians, not means: one slow step moves a mean a
lot and a median hardly at all.

Sources: Efron & Tibshirani, *An Introduction to the Bootstrap* (percentile interval);
Mann & Whitney (1947); SciPy docs, ``scipy.stats.mannwhitneyu``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import KitError

__all__ = ["Comparison", "compare", "compare_series", "SETTINGS", "settings_present"]


@dataclass
class Comparison:
    """The outcome of :func:`compare`, every time in ms: ``n_before, n_after``; the medians
    and IQRs (p75 − p25) of each set; ``difference_ms`` (after − before, negative =
    faster) and ``relative``; ``ci_low_ms, ci_high_ms`` (bootstrap interval) at
    ``confidence``; ``p_value`` (Mann-Whitney, NaN without SciPy); ``verdict``
    (``"faster"``, ``"slower"`` or ``"no difference beyond the noise"``) and ``text``.

    Examples
    --------
    >>> compare([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2]).verdict
    'faster'
    """

    n_before: int
    n_after: int
    before_median_ms: float
    after_median_ms: float
    before_iqr_ms: float
    after_iqr_ms: float
    difference_ms: float
    relative: float
    ci_low_ms: float
    ci_high_ms: float
    confidence: float
    p_value: float
    verdict: str
    text: str

    @property
    def significant(self) -> bool:
        """Whether the confidence interval excludes zero.

        Examples
        --------
        >>> compare([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2]).significant
        True
        """
        return self.verdict != "no difference beyond the noise"

    def __str__(self):
        """:attr:`text`, wrapped to a notebook's width (:func:`kitlib.units.wrapped`)."""
        from ..units import wrapped
        return wrapped(self.text)

    def _repr_markdown_(self):
        return f"**{self.verdict}** — {self.text}"


def _values(x, what: str) -> np.ndarray:
    try:
        v = np.asarray(list(x), dtype="float64")
    except (TypeError, ValueError):
        raise KitError(f"compare: {what} must be a sequence of step times in ms") from None
    if v.size < 3:
        raise KitError(f"compare: {what} holds {v.size} measurement(s); repeat the measurement "
                       "at least 3 times (10 or more for a useful interval)")
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise KitError(f"compare: {what} holds NaN, inf or negative times")
    return v


def compare(before_ms, after_ms, confidence: float = 0.95, n_boot: int = 10_000,
            seed: int = 0) -> Comparison:
    """Whether two sets of repeated step times (ms, at least 3 each) differ by more than
    their noise: "faster" when the whole bootstrap percentile interval of the difference of
    medians (``n_boot`` resamples, seeded by ``seed``) lies below 0, "slower" when above, else
    "no difference beyond the noise"; with the two-sided Mann-Whitney U test's p-value.

    Raises KitError for fewer than 3 values, non-numbers, NaN/inf/negative, or a
    confidence outside (0, 1).

    Examples
    --------
    >>> c = compare([10.0, 10.2, 9.9, 10.1, 10.0], [8.0, 8.1, 7.9, 8.2, 8.0])
    >>> c.before_median_ms, c.after_median_ms, c.difference_ms, c.verdict
    (10.0, 8.0, -2.0, 'faster')
    """
    if not 0 < confidence < 1:
        raise KitError(f"compare: confidence must lie between 0 and 1, not {confidence!r}")
    a, b = _values(before_ms, "before_ms"), _values(after_ms, "after_ms")
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, (n_boot, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (n_boot, b.size))], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(mb - ma, [alpha, 1 - alpha])
    med_a, med_b = float(np.median(a)), float(np.median(b))
    diff = med_b - med_a
    try:
        from scipy.stats import mannwhitneyu
        p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    except ImportError:  # pragma: no cover - scipy comes with scikit-image
        p = float("nan")
    iqr = lambda v: float(np.subtract(*np.percentile(v, [75, 25])))  # noqa: E731
    verdict = "faster" if hi < 0 else "slower" if lo > 0 else "no difference beyond the noise"
    pct = int(round(confidence * 100))
    text = (f"median {med_a:,.2f} ms (IQR {iqr(a):,.2f}, n={a.size}) → {med_b:,.2f} ms (IQR {iqr(b):,.2f}, "
            f"n={b.size}): {diff:+,.2f} ms ({diff / med_a:+.1%}); {pct}% bootstrap interval of the difference "
            f"[{lo:+,.2f}, {hi:+,.2f}] ms, Mann-Whitney p = {p:.2g}. ")
    text += ("The interval includes 0: the change is within the step-to-step noise; measure more steps "
             "before claiming anything." if verdict.startswith("no") else
             f"The interval excludes 0: {verdict} beyond the noise.")
    return Comparison(a.size, b.size, med_a, med_b, iqr(a), iqr(b), diff, diff / med_a, float(lo), float(hi),
                      confidence, p, verdict, text)


def compare_series(series: dict, baseline: str, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """:func:`compare` every series of a ``step_times.json``-like dict against ``baseline``.

    Returns, one row per other series: ``n, median_ms, iqr_ms, difference_ms, relative,
    ci_low_ms, ci_high_ms, p_value, verdict``. Raises KitError when ``baseline`` is missing.

    Examples
    --------
    >>> series = {"before": [10.0, 10.2, 9.9, 10.1, 10.0], "after": [8.0, 8.1, 7.9, 8.2, 8.0]}
    >>> compare_series(series, baseline="before")[["n", "median_ms", "difference_ms", "verdict"]]
           n median_ms difference_ms verdict
    after  5       8.0          -2.0  faster
    """
    if baseline not in series:
        raise KitError(f"compare_series: no series {baseline!r} (have: {', '.join(series)})")
    rows = {}
    for name, vals in series.items():
        if name == baseline:
            continue
        c = compare(series[baseline], vals, confidence=confidence, seed=seed)
        rows[name] = {"n": c.n_after, "median_ms": c.after_median_ms, "iqr_ms": c.after_iqr_ms,
                      "difference_ms": c.difference_ms, "relative": c.relative, "ci_low_ms": c.ci_low_ms,
                      "ci_high_ms": c.ci_high_ms, "p_value": c.p_value, "verdict": c.verdict}
    return pd.DataFrame(rows).T.astype({"n": int}) if rows else pd.DataFrame()


#: The four ways of running the same steps that lesson 10 compares, cheapest first,
#: with the ``step_times.json`` keys that hold them (reference and live names).
SETTINGS = {
    "uninstrumented": ("step_ms_uninstrumented",),
    "NVTX ranges only": ("step_ms_nvtx_only",),
    "torch.profiler, no attribution": ("step_ms_profiler_light",),
    "torch.profiler, shapes+memory+stacks+FLOPs": ("step_ms_profiled_all_attribution", "step_ms_profiler_full"),
}


def settings_present(series: dict) -> pd.DataFrame:
    """Which of the four :data:`SETTINGS` a dict of step-time series holds.

    Returns, indexed by setting: ``series`` (key found, ``""`` if none), ``n``,
    ``median_ms``, ``present``; other series follow under their own key.

    Examples
    --------
    >>> settings_present({"step_ms_uninstrumented": [10.0, 10.4, 9.8]})[["series", "n"]].head(2)
                                      series  n
    setting
    uninstrumented    step_ms_uninstrumented  3
    NVTX ranges only                          0
    """
    rows, used = [], set()
    for setting, keys in SETTINGS.items():
        k = next((k for k in keys if k in series), None)
        v = np.asarray(series[k], dtype=float) if k else np.array([])
        rows.append({"setting": setting, "series": k or "", "n": int(v.size),
                     "median_ms": float(np.median(v)) if v.size else np.nan, "present": k is not None})
        used.add(k)
    for k, vals in series.items():
        if k not in used:
            v = np.asarray(vals, dtype=float)
            rows.append({"setting": k, "series": k, "n": int(v.size), "median_ms": float(np.median(v)),
                         "present": True})
    return pd.DataFrame(rows).set_index("setting")
