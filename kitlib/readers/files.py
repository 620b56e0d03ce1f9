"""Plain file helpers under every reader: bytes (gunzipped when gzipped), JSON, sha256.

The bottom of ``kitlib.readers``: the format readers (``trace``, ``nsys``,
``snapshot``, ``ncu``, ``profiler_table``) and the bundle layer (``bundle``) all
read files through these, so each damaged file gets the same clear error
(:class:`kitlib.errors.KitFileError`, naming the file).
"""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from ..errors import KitFileError


def sha256_of(path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json_file(path):
    """Parse a ``.json`` or ``.json.gz`` file, with kitlib errors for bad files.

    Raises
    ------
    KitFileError
        Missing, empty, truncated gzip, or invalid JSON (with the line, column and
        byte offset where parsing stopped).
    """
    path = Path(path)
    raw = read_bytes_maybe_gz(path)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise KitFileError(path, f"invalid JSON at line {e.lineno}, column {e.colno} "
                                 f"(byte {e.pos}): {e.msg}") from None
    except UnicodeDecodeError as e:
        raise KitFileError(path, f"not UTF-8 text (byte {e.start}); is this really JSON?") from None


def read_bytes_maybe_gz(path) -> bytes:
    """Return a file's bytes, gunzipped when it starts with the gzip magic number.

    Raises
    ------
    KitFileError
        The file is missing, is a folder, is empty, or is a truncated/corrupt gzip.
    """
    path = Path(path)
    if not path.exists():
        raise KitFileError(path, "no such file")
    if path.is_dir():
        raise KitFileError(path, "is a folder, not a file")
    data = path.read_bytes()
    if not data:
        raise KitFileError(path, "the file is empty (0 bytes); was the capture interrupted?")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise KitFileError(path, "truncated gzip: the compressed stream ends early "
                                     "(the file was cut off while being written or copied)") from None
        except (OSError, gzip.BadGzipFile, Exception) as e:  # zlib.error and friends
            raise KitFileError(path, f"corrupt gzip: {e}") from None
        if not data:
            raise KitFileError(path, "the gzip file holds no data")
    return data
