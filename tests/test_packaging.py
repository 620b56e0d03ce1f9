"""The set-up files agree with each other and with the README."""
import re
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
#: the tested versions (tools/freeze_constraints.sh), installed by .ci/run's first environment
CONSTRAINTS = "constraints/tested-versions.txt"
#: the platform the constraints were frozen on (their header says so): markers are read for it
CONSTRAINTS_ENV = {"python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux"}


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
    """.ci/run installs the kit as the README's test command does, in two fresh environments
    (with the tested versions, and with the newest ones), and runs its pytest command in each."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, flags=re.S)
    test_cmd = next(b.strip() for b in blocks if "pytest" in b)
    install, run = test_cmd.split(" && ")
    assert install == 'python -m pip install -e ".[test]"'
    assert run in ci
    assert 'suite_in_fresh_venv tested -c "$CONSTRAINTS" -e ".[test,hub]"' in ci
    assert 'suite_in_fresh_venv newest --upgrade -e ".[test,hub]"' in ci
    assert "npm install -g --no-fund --no-audit configurable-http-proxy@5" in ci   # tests/course/test_hub.py
    assert f"CONSTRAINTS={CONSTRAINTS}\n" in ci and '"$PY" -m venv' in ci


def _pins() -> dict:
    """The constraints file's pins, {canonical name: Version}; each line one exact pin."""
    pins = {}
    for line in (ROOT / CONSTRAINTS).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==" and not req.marker, line
            name = canonicalize_name(req.name)
            assert name not in pins, f"{name} pinned twice"
            pins[name] = Version(spec.version)
    return pins


def test_constraints_pin_every_dependency_within_pyproject_bounds():
    """Every dependency of pyproject.toml and of its test extras is pinned in the constraints
    file, to a version its bound allows; kitlib itself is not pinned, and torch/torchvision carry
    no local label (PyPI's CUDA build and PyTorch's +cpu build of the version both satisfy it)."""
    text = (ROOT / CONSTRAINTS).read_text()
    assert "CPython 3.11 on Linux x86-64" in text and "tools/freeze_constraints.sh" in text
    project = _pyproject()["project"]
    pins = _pins()
    extras = project["optional-dependencies"]
    for dep in project["dependencies"] + extras["test"] + extras["hub"]:
        req = Requirement(dep)
        if req.marker is not None and not req.marker.evaluate(CONSTRAINTS_ENV):
            print(f"{dep}: not installed on the constraints' platform")
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{dep} (pyproject.toml) is not pinned in {CONSTRAINTS}: run tools/freeze_constraints.sh"
        print(f"{dep}: pinned {pins[name]}")
        assert req.specifier.contains(pins[name], prereleases=True), f"{CONSTRAINTS} pins {name}=={pins[name]}, outside {dep}"
    assert "kitlib" not in pins
    assert pins["torch"].local is None and pins["torchvision"].local is None


def test_ci_installs_what_the_browser_test_needs():
    # tests/lessons/test_browser.py drives Debian's Chromium through the playwright package
    test = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "playwright" for d in test)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install" in ci and "chromium" in ci and "fonts-noto-color-emoji" in ci
    assert "playwright install" not in ci


def test_the_readme_runs_the_suite_in_two_processes_and_xdist_is_a_test_extra():
    """README, developer notes and CI give one test command: two processes, the lessons in one
    group (tests/conftest.py's pytest_collection_modifyitems), so pytest-xdist is a test extra."""
    command = 'python -m pip install -e ".[test]" && python -m pytest -n 2 --dist loadgroup'
    for f in ("README.md", "docs/DEVELOPING.md"):
        assert command in (ROOT / f).read_text(), f
    assert command.split(" && ")[1] in (ROOT / ".ci" / "run").read_text()      # in each fresh environment
    test = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.split(r"[<>=!~ ;]", d)[0] == "pytest-xdist" for d in test)
