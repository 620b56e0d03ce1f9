"""``python -m kitlib``: see :mod:`kitlib.capture.cli`."""
from .capture.cli import main

raise SystemExit(main())
