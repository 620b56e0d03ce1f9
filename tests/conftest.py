"""Shared fixtures: the reference recordings (as kitlib bundles) and public traces."""
import os
from pathlib import Path

import pytest

os.environ.setdefault("KITLIB_PROGRESS", "0")      # no progress bars in test output

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "data" / "reference"
PUBLIC = ROOT / "tests" / "data" / "public-traces"


@pytest.fixture(scope="session")
def ref_trace():
    """Load a reference trace once per test session: ref_trace('profiler_5step')."""
    from kitlib.readers.trace import load_trace
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_trace(REF / name / "trace.json.gz")
        return cache[name]
    return get


@pytest.fixture(scope="session")
def public_trace():
    from kitlib.readers.trace import load_trace
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_trace(PUBLIC / name)
        return cache[name]
    return get
