"""Where the kit keeps what it makes: the checkout's folders, or the user's cache.

A base module (it imports only :mod:`kitlib.settings` and :mod:`kitlib.errors`): the readers'
trace cache, the workload's generated dataset and the capture runs all ask here, so the rule is
written once.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import KitError
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
    """Where generated data goes: ``$KITLIB_CACHE``, else ``<checkout>/.cache`` when the checkout
    is writable, else ``~/.cache/kitlib`` (not created here)."""
    return checkout_folder("KITLIB_CACHE", ".cache", Path.home() / ".cache" / "kitlib")


def make_folder(path, option: str, empty: bool = False) -> Path:
    """Create the folder a command writes into (and its parents), or take the one there
    (``empty``: it must be new or empty); ``option`` names the command and option in messages.
    Raises :class:`KitError` in one line: a file, not empty, or it cannot be created."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise KitError(f"{option} {path}: is a file, not a folder; give a folder")
    if empty and path.is_dir() and any(path.iterdir()):
        raise KitError(f"{option} {path}: not empty; give a new or empty folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        block = next((a for a in path.parents if a.exists()), None)
        why = (f"{block} is a file, not a folder" if block is not None and not block.is_dir()
               else e.strerror or str(e))
        raise KitError(f"{option} {path}: cannot create the folder ({why})") from None
    return path
