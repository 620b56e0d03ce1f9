"""Code the test files share that is not a fixture (fixtures live in tests/conftest.py).

Import it as ``from support.events import event`` (pytest puts ``tests/`` on ``sys.path``,
as it does for ``from conftest import ...``)."""
