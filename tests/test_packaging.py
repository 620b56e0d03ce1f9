"""The set-up files agree with each other and with the README."""
import re
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    # environment.yml lists the dependencies, the test extras and the dev extras, so that the
    # README's test command (hypothesis included) and its mutation-testing command (mutmut)
    # run in the conda environment as well.
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    deps = project["dependencies"] + extras["test"] + extras["dev"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert sorted(p for p in pip if not p.startswith("-e")) == sorted(deps)
    assert "-e ." in pip


def test_hypothesis_is_a_test_extra():
    test = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "hypothesis" for d in test)


def test_mutmut_is_a_dev_extra_and_configured():
    pp = _pyproject()
    dev = pp["project"]["optional-dependencies"]["dev"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "mutmut" for d in dev)
    cfg = pp["tool"]["mutmut"]
    assert cfg["only_mutate"] and all(p.startswith("kitlib/analyses/") for p in cfg["only_mutate"])
    for t in cfg["pytest_add_cli_args_test_selection"]:
        assert (ROOT / t).is_file(), t
    # the README's developer section gives the command
    assert "mutmut run" in (ROOT / "README.md").read_text()


def test_required_dependencies_are_listed():
    names = {re.split(r"[<>=!~ ]", d)[0].lower() for d in _pyproject()["project"]["dependencies"]}
    assert {"torch", "torchvision", "jupyterlab", "ipywidgets", "matplotlib", "pandas", "nvtx", "tqdm"} <= names


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, flags=re.S)
    test_cmd = next(b.strip() for b in blocks if "pytest" in b)
    assert test_cmd in ci


def test_ci_installs_what_the_browser_test_needs():
    # tests/test_browser.py drives Debian's Chromium through the playwright package
    test = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "playwright" for d in test)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install" in ci and "chromium" in ci and "fonts-noto-color-emoji" in ci
    assert "playwright install" not in ci


def test_the_readme_runs_the_suite_in_two_processes_and_xdist_is_a_test_extra():
    """README, developer notes and CI give one test command: two processes, the lessons in one
    group (tests/conftest.py's pytest_collection_modifyitems), so pytest-xdist is a test extra."""
    command = 'python -m pip install -e ".[test]" && python -m pytest -n 2 --dist loadgroup'
    for f in ("README.md", "docs/DEVELOPING.md", ".ci/run"):
        assert command in (ROOT / f).read_text(), f
    test = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "pytest-xdist" for d in test)
