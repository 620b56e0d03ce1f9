"""Where the kit keeps what it makes: the checkout's folders, or the user's cache.

A base module (it imports only :mod:`kitlib.settings`): the readers' trace cache, the workload's generated
dataset and the capture runs all ask here, so the rule is written once.
"""
from __future__ import annotations

import os
from pathlib import Path

from .settings import value as setting


def repo_root() -> Path | None:
    """The checkout this kitlib runs from (the folder with ``pyproject.toml``), or
    ``None`` when kitlib is installed elsewhere (e.g. site-packages)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "kitlib").is_dir() else None


def checkout_folder(env_var: str, name: str, fallback: Path) -> Path:
    """``$env_var`` (a setting of :mod:`kitlib.settings`) when set; else ``<checkout>/name``
    when kitlib runs from a checkout whose folder is writable; else ``fallback``. Nothing
    is created here."""
    env = setting(env_var)
    if env:
        return Path(env).expanduser()
    root = repo_root()
    if root is not None and os.access(root, os.W_OK):
        return root / name
    return fallback


def cache_dir() -> Path:
    """Where generated data goes.

    Returns
    -------
    pathlib.Path
        ``$KITLIB_CACHE`` when set; else ``<checkout>/.cache`` (git-ignored) when
        kitlib runs from a checkout whose folder is writable; else
        ``~/.cache/kitlib``. The folder is not created here.
    """
    return checkout_folder("KITLIB_CACHE", ".cache", Path.home() / ".cache" / "kitlib")
