"""kitlib.analyses.compare: the examples once in its docstrings (issue 39)."""
import pytest

from kitlib.analyses.compare import compare, compare_series, settings_present


def test_comparison_fields_and_significance():
    c = compare([10.0, 10.2, 9.9, 10.1, 10.0], [8.0, 8.1, 7.9, 8.2, 8.0])
    assert (c.n_before, c.before_median_ms, c.after_median_ms, c.difference_ms, c.verdict) == \
        (5, 10.0, 8.0, -2.0, "faster")
    assert compare([10.0, 10.2, 9.9, 10.1], [8.0, 8.1, 7.9, 8.2]).significant is True
    assert compare([10.0, 10.2, 9.9, 10.1], [10.1, 9.9, 10.2, 10.0]).significant is False


def test_compare_text():
    c = compare([10, 11, 10.5, 10.2], [8, 8.1, 7.9, 8.2])
    assert str(c).replace("\n", " ").startswith(
        "median 10.35 ms (IQR 0.48, n=4) → 8.05 ms (IQR 0.15, n=4): -2.30 ms (-22.2%); 95% bootstrap ")


def test_compare_series_and_settings_present():
    series = {"before": [10.0, 10.2, 9.9, 10.1, 10.0], "after": [8.0, 8.1, 7.9, 8.2, 8.0]}
    s = compare_series(series, baseline="before")
    assert s.index.tolist() == ["after"]
    assert s.loc["after", ["n", "median_ms", "difference_ms", "verdict"]].tolist() == [5, 8.0, -2.0, "faster"]
    p = settings_present({"step_ms_uninstrumented": [10.0, 10.4, 9.8], "step_ms_fixed_batch": [7.0, 7.1, 7.2]})
    assert p.index.tolist() == ["uninstrumented", "NVTX ranges only", "torch.profiler, no attribution",
                                "torch.profiler, shapes+memory+stacks+FLOPs", "step_ms_fixed_batch"]
    assert p["series"].tolist() == ["step_ms_uninstrumented", "", "", "", "step_ms_fixed_batch"]
    assert p["n"].tolist() == [3, 0, 0, 0, 3]
    assert p["present"].tolist() == [True, False, False, False, True]
