"""The read-only trace cache a class shares (issue 38, ``KITLIB_SHARED_CACHE``).

``python -m kitlib cache --build DIR`` parses the shipped recordings into DIR once (the
course image does it at build time, ``deploy/Dockerfile``); DIR is then made read-only
and every learner's ``load_trace`` reads the tables there: nothing parsed, nothing
written, the same tables as a fresh parse. An entry there that belongs to another file
is passed over (and the file parsed into the learner's own cache).

The writes are looked for two ways, as these tests run as root (for whom ``chmod a-w``
stops nothing): every path of the shared folder with its size, mode and times before and
after, and spies on the cache's three writers (``store``, ``remember_hash``, ``_write``).
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import orjson
import pandas as pd
import pytest

from kitlib.course import cli
from kitlib.readers import trace_cache
from kitlib.readers.bundle import clinic_dir, open_capture, reference_dir
from kitlib.readers.ranks import load_traces
from kitlib.readers.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
#: What the image runs (deploy/Dockerfile), word for word: the tests run the same.
BUILD_COMMAND = "python -m kitlib cache --build /opt/kitlib/cache"
#: A few recordings, one of each kind: a bundle, plain public traces, a two-rank clinic case.
FEW = ["profiler_5step", "public-traces", "clinic/cpu/case_b"]


def _build(dest: Path, names, capsys) -> list:
    """Run the image's command line (with ``dest`` and ``names``) through ``python -m
    kitlib``'s entry point; returns the lines it printed."""
    argv = BUILD_COMMAND.split()[3:]                  # "cache --build /opt/kitlib/cache"
    argv[-1] = str(dest)
    assert cli.main([*argv, *names]) == 0
    return capsys.readouterr().out.splitlines()


def _read_only(folder: Path) -> None:
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _snapshot(folder: Path) -> dict:
    """Every path under ``folder`` with its size, mode and modification and change times
    (a file made and deleted again still moves its folder's times)."""
    out = {}
    for p in [folder, *folder.rglob("*")]:
        st = p.lstat()
        out[str(p.relative_to(folder))] = (st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)
    return out


def _spy_writes(monkeypatch) -> list:
    """Calls of the cache's writers, recorded (and let through)."""
    calls = []
    for name in ("store", "remember_hash", "_write"):
        real = getattr(trace_cache, name)

        def spy(*a, _real=real, _name=name, **k):
            calls.append((_name, a[:1]))
            return _real(*a, **k)
        monkeypatch.setattr(trace_cache, name, spy)
    return calls


def _loads():
    """The traces of :data:`FEW` as the lessons load them: ``[(label, path, torch_version)]``."""
    cap = open_capture(reference_dir() / "profiler_5step")
    out = [("profiler_5step", cap.file("trace.json.gz"), cap.provenance["torch"])]
    out += [(f"public-traces/{p.name}", p, None) for p in sorted((reference_dir() / "public-traces").glob("*.json.gz"))]
    for side in ("before", "after"):
        out += [(f"case_b/{side}/{p.parent.name}", p, None)
                for p in sorted((clinic_dir() / "cpu" / "case_b" / side).glob("rank*/trace.json.gz"))]
    return out


def _fresh(path, torch_version):
    """The trace parsed afresh, no cache read or written."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KITLIB_TRACE_CACHE", "0")
        return load_trace(path, torch_version=torch_version, progress=False)


def _same_tables(got, want) -> None:
    for name in trace_cache.TABLES:
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name), check_exact=True)
    assert got.meta == want.meta


@pytest.fixture
def learner(tmp_path, monkeypatch):
    """A learner's session: an empty cache of their own, the shared one unset for now."""
    own = tmp_path / "own"
    monkeypatch.setenv("KITLIB_CACHE", str(own))
    monkeypatch.delenv("KITLIB_SHARED_CACHE", raising=False)
    monkeypatch.delenv("KITLIB_TRACE_CACHE", raising=False)
    monkeypatch.setenv("KITLIB_PROGRESS", "0")
    return own


@pytest.mark.parametrize("memos", ["matching", "another_device"])
def test_every_load_is_answered_by_the_read_only_shared_cache(tmp_path, learner, monkeypatch, capsys, memos):
    """``memos``: the shared folder's hash memos as the build left them (the files not moved
    since: the entry found without reading the file), or naming another device, as in a
    Docker image, whose layers give the files another device and change time than at
    build: the file is read and hashed, the entry found by its hash, still nothing written."""
    shared = tmp_path / "shared"
    lines = _build(shared, FEW, capsys)
    if memos == "another_device":
        for m in (shared / "trace-hashes").iterdir():
            doc = orjson.loads(m.read_bytes())
            doc["stat"][0] += 1
            m.write_bytes(orjson.dumps(doc))
    print("\n".join(lines))
    loads = _loads()
    assert len(loads) == 7                            # 1 bundle trace, 2 public, 2 ranks x before/after
    assert lines[-1].startswith(f"{shared.resolve()}: 3 recordings, 7 traces (7 parsed now), 7 entries, ")
    assert len(list((shared / "traces").iterdir())) == 7
    assert not learner.exists()                       # the build wrote only into DIR
    _read_only(shared)
    before = _snapshot(shared)
    monkeypatch.setenv("KITLIB_SHARED_CACHE", str(shared))
    calls = _spy_writes(monkeypatch)
    hits = trace_cache.hits.copy()
    got = {label: load_trace(p, torch_version=v, progress=False) for label, p, v in loads}
    # the two-rank reader asks the cache first (never forking workers to read entries)
    ranks = load_traces(clinic_dir() / "cpu" / "case_b" / "before", progress=False)
    trace_cache.wait()
    assert trace_cache.hits - hits == {"shared": 9}   # 7 + the two ranks again: none parsed, none from own
    assert calls == []                                # no memo, no entry, not even a try
    assert _snapshot(shared) == before                # nothing made, changed or deleted in DIR
    assert not learner.exists()                       # nor in the learner's own cache
    for label, p, v in loads:
        want = _fresh(p, v)
        _same_tables(got[label], want)
        print(f"{label}: {len(got[label].ops)} ops, {len(got[label].gpu)} GPU rows from the shared cache; "
              f"a fresh parse: {len(want.ops)}, {len(want.gpu)}")
    _same_tables(ranks.traces[0], got["case_b/before/rank0"])


def test_a_shared_entry_that_belongs_to_another_file_is_passed_over(tmp_path, learner, monkeypatch, capsys):
    shared = tmp_path / "shared"
    _build(shared, ["profiler_5step", "fixed_batch"], capsys)
    caps = {n: open_capture(reference_dir() / n) for n in ("profiler_5step", "fixed_batch")}
    keys = {n: trace_cache.key_for(c.file("trace.json.gz").read_bytes(), c.provenance["torch"])
            for n, c in caps.items()}
    # fixed_batch's entry copied over profiler_5step's (issue 41's fault, in the shared folder)
    a, b = (shared / "traces" / keys[n] for n in ("profiler_5step", "fixed_batch"))
    shutil.rmtree(a)
    shutil.copytree(b, a)
    _read_only(shared)
    before = _snapshot(shared)
    monkeypatch.setenv("KITLIB_SHARED_CACHE", str(shared))
    path, v = caps["profiler_5step"].file("trace.json.gz"), caps["profiler_5step"].provenance["torch"]
    hits = trace_cache.hits.copy()
    tr = load_trace(path, torch_version=v, progress=False)
    trace_cache.wait()
    assert trace_cache.hits - hits == {"parsed": 1}
    want, other = _fresh(path, v), _fresh(caps["fixed_batch"].file("trace.json.gz"), caps["fixed_batch"].provenance["torch"])
    print(f"profiler_5step: {len(tr.ops)} ops loaded, {len(want.ops)} parsed afresh; fixed_batch's entry: "
          f"{len(other.ops)}")
    assert len(want.ops) != len(other.ops)            # the copied entry would show
    _same_tables(tr, want)
    assert _snapshot(shared) == before                # the bad entry is left there (read-only), not deleted
    assert (learner / "traces" / keys["profiler_5step"] / "entry.json").is_file()   # parsed into the own cache
    hits = trace_cache.hits.copy()
    _same_tables(load_trace(path, torch_version=v, progress=False), want)
    assert trace_cache.hits - hits == {"own": 1}      # and read from there next time


def test_the_full_build_caches_every_shipped_trace(tmp_path, learner, capsys):
    shared = tmp_path / "shared"
    lines = _build(shared, [], capsys)
    print("\n".join(lines))
    # counted independently: the bundles' and rank folders' trace files, and the public ones
    files = [p for d in (reference_dir(), clinic_dir()) for p in d.rglob("*.json.gz")
             if p.name == "trace.json.gz" or p.parent.name.startswith("public-")]
    print(f"trace files in the package: {len(files)}")
    assert len(files) == 35          # 31 before the clinic's cases k and l (6 December)
    n = len(cli.shipped_recordings())
    assert n == len([d for d in reference_dir().iterdir() if d.is_dir()]) + 13       # 13 clinic folders (cases a-h, k, l, their healthy runs)
    assert f": {n} recordings, {len(files)} traces ({len(files)} parsed now), {len(files)} entries, " in lines[-1]
    assert len(lines) == n + 1                        # a line per recording, then the summary


def test_an_unknown_name_is_refused_with_the_list(tmp_path, capsys):
    assert cli.main(["cache", "--build", str(tmp_path / "c"), "profiler_5stp"]) == 2
    err = capsys.readouterr().err
    assert "no shipped recording named profiler_5stp; recordings: cold_start_8step" in err
    assert "clinic/cpu/case_b" in err
    assert not (tmp_path / "c").exists()


# --- the image recipe -------------------------------------------------------------------

def _run_lines(text: str) -> list:
    """The Dockerfile's instructions, continuation lines joined."""
    return [" ".join(x.split()) for x in text.replace("\\\n", " ").splitlines() if x.strip() and not x.lstrip().startswith("#")]


def test_the_dockerfile_runs_what_these_tests_run():
    text = DOCKERFILE.read_text()
    lines = _run_lines(text)
    runs = [x for x in lines if x.startswith("RUN ")]
    build = [x for x in runs if BUILD_COMMAND in x]
    assert len(build) == 1, runs
    # the build runs as the image's last root step, then DIR is made read-only
    assert "chmod -R a-w /opt/kitlib/cache" in build[0]
    args = cli.build_parser().parse_args(BUILD_COMMAND.split()[3:])
    assert (args.command, args.build, args.names) == ("cache", "/opt/kitlib/cache", [])
    # the kit non-editable (the recordings inside the package), never -e
    installs = [x for x in runs if "pip install" in x and "." in x.split()]
    assert installs and all(" -e " not in x and "--editable" not in x for x in installs)
    assert "ENV KITLIB_SHARED_CACHE=/opt/kitlib/cache" in " ".join(lines)
    assert "KITLIB_MODE=replay" in " ".join(lines)
    assert "ARG NB_USER=jovyan" in lines and "USER ${NB_USER}" in lines    # as Binder and JupyterHub expect
    assert lines.index("USER ${NB_USER}") > lines.index(build[0])      # the cache built as root, then read-only
    # CPU by default, a GPU variant by a build argument; torch pinned to the class's versions
    assert "ARG VARIANT=cpu" in lines
    pins = _class_pins()
    for pkg in ("torch", "torchvision"):
        assert f"ARG {pkg.upper()}_VERSION={pins[pkg]}" in lines, (pkg, pins[pkg])


def test_the_image_and_the_hub_give_jupyterlab_the_class_settings():
    """Issue 40: JupyterLab's news notification covered the bottom-right of a learner's screen.
    deploy/jupyterlab/overrides.json turns news and update checks off; the image copies it to
    its Python's ``{sys.prefix}/share/jupyter/lab/settings/overrides.json`` (JupyterLab's app
    settings folder), the hub's route in docs/TEACHING_A_CLASS.md to /opt/kit's, and the
    browser test's JupyterLab reads the same file. Every plugin and setting it names exists in
    the installed JupyterLab's schemas, and each value is one the schema allows."""
    import json
    import sys

    import jsonschema
    overrides_file = ROOT / "deploy" / "jupyterlab" / "overrides.json"
    overrides = json.loads(overrides_file.read_text())
    assert overrides == {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                                          "checkForUpdates": False}}
    lines = _run_lines(DOCKERFILE.read_text())
    step = next(x for x in lines if x.startswith("RUN ") and "overrides.json" in x)
    assert ("settings=\"$(python -c 'import sys; print(sys.prefix)')/share/jupyter/lab/settings\"" in step
            and 'cp deploy/jupyterlab/overrides.json "${settings}/overrides.json"' in step), step
    assert "pip install ${c} ." in step and step.index("pip install") < step.index("overrides.json")
    docs = (ROOT / "docs" / "TEACHING_A_CLASS.md").read_text()
    assert ("cp /opt/course/deploy/jupyterlab/overrides.json /opt/kit/share/jupyter/lab/settings/overrides.json"
            in docs)
    import importlib.util
    spec = importlib.util.spec_from_file_location("kit_browser_helpers", ROOT / "tests" / "support" / "browser.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    assert helpers.CLASS_OVERRIDES == overrides_file
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, values in overrides.items():
        package, _, name = plugin.partition(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in values.items():
            assert key in schema["properties"], (plugin, key, sorted(schema["properties"]))
            jsonschema.validate(value, schema["properties"][key])
            assert value != schema["properties"][key]["default"], (plugin, key)    # it changes something


def _class_pins() -> dict:
    """torch's and torchvision's versions for the class: ``constraints/``'s when it is
    there, else the versions this image was written for."""
    pins = {"torch": "2.14.1", "torchvision": "0.29.1"}
    for f in sorted((ROOT / "constraints").glob("*.txt")) if (ROOT / "constraints").is_dir() else []:
        for line in f.read_text().splitlines():
            name, _, ver = line.split("#")[0].strip().partition("==")
            if name.strip().lower() in pins and ver:
                pins[name.strip().lower()] = ver.strip().split("+")[0]
    return pins


def test_pip_install_then_the_cache_build_from_the_installed_package(tmp_path):
    """The Dockerfile's two steps for real, in a throwaway venv: ``pip install .`` (of a
    copy of the checkout: the kit and its recordings) then the cache build, which finds the
    recordings inside the installed package. The venv sees this environment's packages (a
    ``.pth`` line), so nothing but the build backend is downloaded; this environment's
    editable kitlib is hidden by the venv's own."""
    import subprocess
    import sys
    src = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "kitlib", src / "kitlib", ignore=junk)
    shutil.copytree(ROOT / "data" / "reference", src / "data" / "reference", ignore=junk)
    shutil.copytree(ROOT / "data" / "clinic", src / "data" / "clinic", ignore=junk)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / f, src / f)
    # a venv of its own that sees this environment's packages (pip, pandas, torch...) through a
    # .pth line, after its own site-packages: the kit installed there wins, and the editable
    # install's .pth is not processed (a path added by a .pth line is not a site dir). The build
    # backend (setuptools>=68, pyproject.toml) comes from the index in pip's isolated build
    # environment, as in the Dockerfile (a fresh machine's Python may have setuptools 65).
    import sysconfig
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    here = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zz_parent_env.pth").write_text("".join(f"{p}\n" for p in here))
    py = str(tmp_path / "venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KITLIB_REFERENCE", "KITLIB_REPLAY_DIR", "KITLIB_SHARED_CACHE")}
    env.update(KITLIB_CACHE=str(tmp_path / "never"), KITLIB_PROGRESS="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "."], cwd=src, env=env,
                   check=True, timeout=300, capture_output=True)
    shutil.rmtree(src)                                # nothing left to read but the installed package
    out = subprocess.run([py, "-c", "import kitlib; print(kitlib.__file__)"], cwd=tmp_path, env=env,
                         check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    assert out.startswith(str(tmp_path / "venv")) and out.endswith("site-packages/kitlib/__init__.py"), out
    dest = tmp_path / "opt" / "cache"
    cmd = BUILD_COMMAND.replace("/opt/kitlib/cache", str(dest)).split()
    cmd[0] = py
    r = subprocess.run([*cmd, "profiler_5step", "clinic/cpu/case_a"], cwd=tmp_path, env=env, check=True,
                       capture_output=True, text=True, timeout=300)
    print(r.stdout)
    assert r.stdout.splitlines()[-1].startswith(f"{dest}: 2 recordings, 3 traces (3 parsed now), 3 entries, ")
    assert not (tmp_path / "never").exists()
    # and the installed kit reads them there, with the folder read-only
    _read_only(dest)
    probe = ("import kitlib; from kitlib.readers import trace_cache as tc; c = kitlib.open_capture('profiler_5step'); "
             "print(c.path); print(len(c.trace.ops), dict(tc.hits))")
    env["KITLIB_SHARED_CACHE"] = str(dest)
    got = subprocess.run([py, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True, text=True,
                         timeout=120).stdout.splitlines()
    print(got)
    assert got[0].startswith(str(tmp_path / "venv")) and got[0].endswith("kitlib/reference_data/profiler_5step")
    assert got[1].endswith("{'shared': 1}")
    assert not (tmp_path / "never").exists()
