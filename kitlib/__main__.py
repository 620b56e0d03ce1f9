"""``python -m kitlib``: see :mod:`kitlib.cli`."""
from .cli import main

raise SystemExit(main())
