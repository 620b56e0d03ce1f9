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


def _kitlib_constants() -> set:
    """Names bound at module level anywhere in kitlib to a ``"KITLIB_…"`` string
    (``REPLAY_DIR_ENV = "KITLIB_REPLAY_DIR"``), so a read through one is caught too."""
    import ast
    names = set()
    for p in KIT.rglob("*.py"):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and node.value.value.startswith("KITLIB_"):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def environment_reads_of_settings(source: str, constants: set) -> list:
    """Line numbers where ``source`` reads a ``KITLIB_*`` variable from the environment
    itself (``os.environ.get``/``[]``/``in``, ``os.getenv``, ``environ`` imported from os),
    by a literal name or a constant holding one."""
    import ast

    def is_environ(n):
        return (isinstance(n, ast.Attribute) and n.attr == "environ") or (isinstance(n, ast.Name) and n.id == "environ")

    def names_setting(n):
        return (isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("KITLIB_")) \
            or (isinstance(n, ast.Name) and n.id in constants) \
            or (isinstance(n, ast.JoinedStr) and any(names_setting(v) for v in n.values))

    hits = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            if (is_environ(f.value) and f.attr in ("get", "setdefault", "pop")) or \
                    (f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os"):
                key = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getenv" and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops) \
                and any(is_environ(c) for c in node.comparators):
            key = node.left
        if key is not None and names_setting(key):
            hits.append(node.lineno)
    return hits


def test_the_environment_check_catches_every_spelling():
    consts = {"SCALE_ENV"}
    bad = ['import os\nx = os.environ.get("KITLIB_MODE", "auto")',
           'import os\nx = os.environ["KITLIB_CACHE"]',
           'import os\nx = os.getenv("KITLIB_RUNS")',
           'import os\nx = "KITLIB_NSYS" in os.environ',
           'from os import environ\nx = environ.get(SCALE_ENV)',
           'import os\nx = os.environ.get(SCALE_ENV, "").strip()']
    for src in bad:
        assert environment_reads_of_settings(src, consts) == [2], src
    fine = ['import os\nx = os.environ.get("TORCH_CPP_LOG_LEVEL")', 'import os\nenv = dict(os.environ)',
            'from kitlib.settings import value\nx = value("KITLIB_MODE")']
    for src in fine:
        assert environment_reads_of_settings(src, consts) == [], src


def test_only_the_settings_module_reads_kitlib_variables_from_the_environment():
    consts = _kitlib_constants()
    found = {}
    for p in sorted(KIT.rglob("*.py")):
        if p == KIT / "settings.py":
            continue
        lines = environment_reads_of_settings(p.read_text(), consts)
        if lines:
            found[str(p.relative_to(KIT.parent))] = lines
    assert not found, f"KITLIB_* read from os.environ outside kitlib/settings.py (use kitlib.settings): {found}"


def test_python_m_kitlib_info_prints_the_settings_table(monkeypatch, capsys, tmp_path):
    from kitlib.capture.cli import settings_lines
    from kitlib.course.cli import main
    monkeypatch.setenv("KITLIB_PLOT_SCALE", " 1.5 ")
    monkeypatch.setenv("KITLIB_FOOD101", str(tmp_path / "no-food"))     # set, not usable: info says so
    monkeypatch.delenv("KITLIB_NSYS", raising=False)
    monkeypatch.setenv("KITLIB_MODE", "")                                # empty: the default
    lines = settings_lines()
    assert lines[0].startswith("settings (")
    assert len(lines) == 1 + len(settings.SETTINGS)
    rows = {r["name"]: r for r in settings.describe()}
    for name, line in zip(settings.SETTINGS, lines[1:]):
        assert line.split()[0] == name and line.endswith(rows[name]["meaning"]), line
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert "  1.5 [set]: " in by_name["KITLIB_PLOT_SCALE"]
    assert "  auto [default]: " in by_name["KITLIB_MODE"]
    assert "  (unset) [default]: " in by_name["KITLIB_NSYS"]
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "\n".join(lines) in text


def test_describe_lists_the_settings_in_order_with_their_columns():
    # the Examples of settings.describe, moved here (issue 39)
    rows = settings.describe()
    assert [r["name"] for r in rows][:3] == ["KITLIB_MODE", "KITLIB_REPLAY_DIR", "KITLIB_REFERENCE"]
    assert sorted(rows[0]) == ["default", "meaning", "name", "read_by", "set", "value"]
