"""One settings module (issue 27): every KITLIB_* variable the kit reads is listed in
kitlib.settings with its default and meaning, read when asked (not at import), and
``settings.describe()`` gives the rows ``python -m kitlib info`` prints."""
from __future__ import annotations

import re
from pathlib import Path

from kitlib import settings

KIT = Path(__file__).resolve().parent.parent / "kitlib"


def test_every_variable_the_kit_names_is_a_setting():
    named = set()
    for p in KIT.rglob("*.py"):
        named |= set(re.findall(r"\bKITLIB_[A-Z0-9_]+\b", p.read_text()))
    named.discard("KITLIB_")
    # variables that only the tests or CI set, never the kit, are not settings
    missing = sorted(named - set(settings.SETTINGS))
    assert not missing, f"KITLIB_* variables with no row in kitlib.settings.SETTINGS: {missing}"


def test_describe_reads_the_environment_when_asked(monkeypatch):
    rows = {r["name"]: r for r in settings.describe()}
    assert set(rows) == set(settings.SETTINGS)
    assert all(r["meaning"] and r["read_by"] for r in rows.values())
    monkeypatch.setenv("KITLIB_TRACE_CACHE", " OFF ")
    assert settings.is_off("KITLIB_TRACE_CACHE")
    rows = {r["name"]: r for r in settings.describe()}
    assert rows["KITLIB_TRACE_CACHE"]["value"] == "OFF" and rows["KITLIB_TRACE_CACHE"]["set"] is True
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "")
    assert settings.value("KITLIB_TRACE_CACHE") == "1" and not settings.is_set("KITLIB_TRACE_CACHE")
    monkeypatch.delenv("KITLIB_MODE", raising=False)
    assert settings.value("KITLIB_MODE") == "auto"


def test_the_readers_read_their_settings_through_it(monkeypatch, tmp_path):
    from kitlib.readers import bundle, trace_cache
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "no")
    assert trace_cache.enabled() is False
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "1")
    assert trace_cache.enabled() is True
    monkeypatch.setenv("KITLIB_REFERENCE", str(tmp_path))
    assert bundle.reference_dir() == tmp_path


def test_one_spelling_of_the_phase_labels():
    from kitlib import phases
    from kitlib.analyses import align, memory, steps
    assert phases.LABELS == (phases.DATA_LOAD, phases.H2D, phases.FORWARD, phases.BACKWARD, phases.OPTIMIZER)
    assert steps.PHASES is phases.LABELS and align.PHASES is phases.LABELS
    import inspect
    assert inspect.signature(memory.memory_timeline).parameters["phases"].default is phases.LABELS
    # no module of the model, readers or analyses spells the tuple out again
    for layer in ("model", "readers", "analyses"):
        for p in (KIT / layer).glob("*.py"):
            assert '"data_load", "h2d", "forward"' not in p.read_text(), p
