"""Kit errors cross a process boundary as themselves (issue 29: load_traces reads ranks in
worker processes, and an error raised there comes back pickled)."""
from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from kitlib.errors import (BundleError, KitError, KitFileError, NsysFormatError, TraceFormatError,
                           UnsafePickleError)


@pytest.mark.parametrize("cls", [KitFileError, TraceFormatError, BundleError, NsysFormatError, UnsafePickleError])
def test_a_file_error_pickles_with_its_path_and_problem(cls, tmp_path):
    e = cls(tmp_path / "rank1.json", "truncated gzip")
    e.note = "kept"                                   # attributes set after raising travel too
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and isinstance(back, KitError)
    assert (back.path, back.problem, str(back), back.note) == (e.path, e.problem, str(e), "kept")
    assert str(back) == f"{tmp_path / 'rank1.json'}: truncated gzip"


def _fails(path):
    raise TraceFormatError(path, "has no 'traceEvents'")


def test_a_file_error_raised_in_a_worker_process_comes_back_as_itself():
    with ProcessPoolExecutor(max_workers=1) as pool:
        with pytest.raises(TraceFormatError, match=r"^r0\.json: has no 'traceEvents'$") as got:
            pool.submit(_fails, "r0.json").result(timeout=120)
    assert (got.value.path, got.value.problem) == ("r0.json", "has no 'traceEvents'")
