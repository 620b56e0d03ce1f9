#!/usr/bin/env bash
# Regenerate constraints/tested-versions.txt: build a fresh virtual environment with the
# newest versions pyproject.toml's bounds allow (pip install --upgrade -e ".[test,hub]"), and write
# its `pip freeze` (kitlib itself left out) under a header saying how it was made.
#
#   tools/freeze_constraints.sh [PYTHON]      # PYTHON: the interpreter to build it with (python)
#
# Make it with CPython 3.11 on Linux x86-64 (the lock is for that), then run .ci/run, which
# tests the new pins, and commit the file. About 2.5 minutes and 6.4 GB (torch's CUDA build
# from PyPI), removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python}
out=constraints/tested-versions.txt
venv=$(mktemp -d "${TMPDIR:-/tmp}/kitlib-freeze.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$PY" -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$venv/bin/python" -m pip install -q --upgrade -e ".[test,hub]"
mkdir -p constraints
{
    cat <<EOF
# Tested versions of everything \`pip install -e ".[test,hub]"\` installs: the kit's dependencies,
# its test and hub extras, and theirs, for CPython 3.11 on Linux x86-64. Install with them:
#     python -m pip install -c $out -e ".[test,hub]"
# .ci/run runs the suite in a fresh virtual environment built so (and in a second one with the
# newest versions pyproject.toml allows). torch is pinned without a local label, so PyTorch's
# CPU index's +cpu build of the same version satisfies it as well as PyPI's CUDA build; the
# nvidia-*, cuda-* and triton pins only hold where the CUDA build brings them in (a constraint
# never installs anything by itself).
# Made by tools/freeze_constraints.sh on $(date -u +%Y-%m-%d) ($("$venv/bin/python" -c 'import platform, sys; print(f"Python {platform.python_version()}, {sys.platform} {platform.machine()}")'), $("$venv/bin/python" -m pip --version | cut -d' ' -f1-2)):
# pip freeze of a fresh venv after pip install --upgrade -e ".[test,hub]". Run it again to
# regenerate; tests/test_packaging.py checks that every dependency of pyproject.toml is here.
EOF
    "$venv/bin/python" -m pip freeze --exclude-editable | grep -vi '^kitlib[ =@]' || true
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(grep -vc '^#' "$out") pins)"
