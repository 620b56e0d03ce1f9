"""Errors raised by kitlib.

Every error names the file it is about and says what is wrong with it, so a
learner never has to decode a bare ``KeyError`` or a silently empty table.
"""
from __future__ import annotations

import os


class KitError(Exception):
    """Base class of every error kitlib raises on purpose."""


class KitFileError(KitError):
    """A file (``path``) is missing, empty, truncated, or not what it claims to be; ``problem``
    says what is wrong in one sentence."""

    def __init__(self, path, problem: str):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):
        # rebuilt from (path, problem), so it crosses a process pool (load_traces) as itself
        return self.__class__, (self.path, self.problem), self.__dict__


class TraceFormatError(KitFileError):
    """The file is readable but is not a trace kitlib understands."""


class BundleError(KitFileError):
    """A capture bundle is incomplete or its files do not match its manifest."""


class NsysFormatError(KitFileError):
    """The file is not an Nsight Systems SQLite export kitlib can read."""


class UnsafePickleError(KitFileError):
    """A pickle asked to build an object that is not a plain container or number."""


class KitDataWarning(UserWarning):
    """A reader read a file despite a defect (rows left out, a name it could not
    read); the defect is also recorded on the result (e.g. ``NsysReport.defects``)."""
