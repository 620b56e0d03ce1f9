"""``python -m kitlib``: see :mod:`kitlib.cli`."""
from .capture.cli import main

raise SystemExit(main())
