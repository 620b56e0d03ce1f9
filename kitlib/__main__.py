"""``python -m kitlib``: see :mod:`kitlib.capture.cli` and :mod:`kitlib.course.cli`."""
from .course.cli import main

raise SystemExit(main())
