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

try:  # orjson parses about 3x faster than the standard library; the kit lists it.
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency, but stay readable without it
    _orjson = None


def sha256_of(path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from kitlib.readers.files import sha256_of
    >>> p = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = p.write_bytes(b"abc")
    >>> sha256_of(p)[:16]
    'ba7816bf8f01cfea'
    >>> p.unlink(); p.parent.rmdir()
    """
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
        byte offset where parsing stopped, and why: see :func:`parse_json`).

    Examples
    --------
    >>> import gzip, tempfile
    >>> from pathlib import Path
    >>> from kitlib.readers.files import read_json_file
    >>> p = Path(tempfile.mkdtemp()) / "doc.json.gz"
    >>> _ = p.write_bytes(gzip.compress(b'{"traceEvents": [], "schemaVersion": 1}'))
    >>> read_json_file(p)
    {'traceEvents': [], 'schemaVersion': 1}
    >>> _ = p.write_bytes(b'{"traceEvents": [')
    >>> try:
    ...     read_json_file(p)
    ... except Exception as e:
    ...     print(type(e).__name__)
    KitFileError
    >>> p.unlink(); p.parent.rmdir()
    """
    path = Path(path)
    return parse_json(read_bytes_maybe_gz(path), path)


def parse_json(raw: bytes, path):
    """Parse JSON bytes strictly (orjson; the standard library when orjson is absent).

    Strict means what RFC 8259 allows: UTF-8 text, no ``NaN``/``Infinity``, no lone
    UTF-16 surrogate escapes. Nesting deeper than 1024 levels is refused too (orjson's
    limit), without any recursion in kitlib.

    Parameters
    ----------
    raw : bytes
        The document (already gunzipped, e.g. by :func:`read_bytes_maybe_gz`).
    path : str or os.PathLike
        The file it came from, named in the error.

    Returns
    -------
    dict, list, str, int, float, bool or None

    Raises
    ------
    KitFileError
        ``path: invalid JSON at line L, column C (byte N): reason`` (see
        :func:`json_error`), or ``path: not UTF-8 text at line L, column C (byte N)``.

    Examples
    --------
    >>> from kitlib.readers.files import parse_json
    >>> parse_json(b'{"a": 1}', "x.json")
    {'a': 1}
    >>> parse_json(b'{"a": }', "x.json")
    Traceback (most recent call last):
    ...
    kitlib.errors.KitFileError: x.json: invalid JSON at line 1, column 7 (byte 6): Expecting value
    """
    try:
        if _orjson is not None:
            return _orjson.loads(raw)
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:    # JSONDecodeError, UnicodeDecodeError
        raise json_error(path, raw, e) from None


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON value")


_NOT_JSON_NUMBER = ("NaN and Infinity are not JSON values (Python's json.dumps writes them for "
                    "float('nan') and float('inf'); strict JSON readers, orjson and the trace "
                    "viewers among them, refuse them): write null or a number")
_LONE_SURROGATE = ("a \\uD800-\\uDFFF escape without its other half (a lone UTF-16 surrogate) "
                   "stands for no character")
_TOO_DEEP = ("the values nest deeper than 1024 levels, more than any JSON reader kitlib uses "
             "accepts")


def _line_col(raw: bytes, byte: int):
    line = raw.count(b"\n", 0, byte) + 1
    return line, byte - (raw.rfind(b"\n", 0, byte) + 1) + 1


def json_error(path, raw: bytes, err: BaseException | None = None) -> KitFileError:
    """The KitFileError for JSON bytes that did not parse: where, and why.

    Parameters
    ----------
    path : str or os.PathLike
        The file, named in the message.
    raw : bytes
        The whole document.
    err : exception, optional
        What the parser raised (an ``orjson.JSONDecodeError``, a
        ``json.JSONDecodeError``, a ``UnicodeDecodeError``); its position is
        used for the kinds the standard library would accept or could not
        reach (``NaN``, a lone surrogate, deep nesting).

    Returns
    -------
    KitFileError
        ``invalid JSON at line L, column C (byte N)[ (the file ends there: it
        looks cut off)]: reason`` or ``not UTF-8 text at line L, column C (byte
        N): ...``. Byte offsets count bytes of ``raw``; lines and columns are 1-based.

    Notes
    -----
    Never recurses: the standard library's parser (which gives the familiar
    messages, "Expecting ',' delimiter") is asked only when orjson's error is
    an ordinary syntax error, and a ``RecursionError`` from it falls back to
    orjson's position.

    Examples
    --------
    >>> from kitlib.readers.files import json_error
    >>> print(json_error("doc.json", b'{"a": 1, "b": }'))
    doc.json: invalid JSON at line 1, column 15 (byte 14): Expecting value
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(raw, e.start)
        return KitFileError(path, f"not UTF-8 text at line {line}, column {col} (byte {e.start}): "
                                  f"the bytes {raw[e.start:e.start + 4].hex(' ')} are not UTF-8 "
                                  f"({e.reason}); is this really JSON, or a file saved in "
                                  "another encoding?")
    msg = getattr(err, "msg", None) or str(err or "")
    ended = "end of data" in msg
    pos = getattr(err, "pos", None)
    doc = getattr(err, "doc", None)
    byte = None
    if isinstance(pos, int) and isinstance(doc, str):       # a char position: count its bytes
        byte = len(doc[:pos].encode("utf-8", "surrogatepass"))
    reason = None
    if byte is not None:
        ahead = raw[max(byte - 1, 0):byte + 9]
        if any(t in ahead for t in (b"NaN", b"Infinity")):
            reason = _NOT_JSON_NUMBER
        elif "surrogate" in msg:
            reason = _LONE_SURROGATE
        elif "depth" in msg or "recursion" in msg.lower():
            reason = _TOO_DEEP
    if "is not a JSON value" in msg:                    # the standard library's parse_constant
        reason = _NOT_JSON_NUMBER
    if isinstance(err, RecursionError):
        reason = _TOO_DEEP
    if reason is None:
        try:                                             # the standard library's position and words
            json.loads(raw.decode("utf-8"))
        except json.JSONDecodeError as e:
            byte, msg = len(e.doc[:e.pos].encode("utf-8", "surrogatepass")), e.msg
            ended = ended or msg.startswith("Unterminated string")
        except (RecursionError, ValueError):
            pass
        reason = msg or "not valid JSON"
    if byte is None:
        return KitFileError(path, f"invalid JSON: {reason}")
    line, col = _line_col(raw, byte)
    ended = ended or byte >= len(raw.rstrip())
    cut = " (the file ends there: it looks cut off)" if ended else ""
    return KitFileError(path, f"invalid JSON at line {line}, column {col} (byte {byte}){cut}: {reason}")


def read_bytes_maybe_gz(path) -> bytes:
    """Return a file's bytes, gunzipped when it starts with the gzip magic number.

    Raises
    ------
    KitFileError
        The file is missing, is a folder, is empty, or is a truncated/corrupt gzip.

    Examples
    --------
    >>> import gzip, tempfile
    >>> from pathlib import Path
    >>> from kitlib.readers.files import read_bytes_maybe_gz
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.gz").write_bytes(gzip.compress(b"hello"))
    >>> _ = (d / "b.txt").write_bytes(b"hello")
    >>> read_bytes_maybe_gz(d / "a.gz"), read_bytes_maybe_gz(d / "b.txt")
    (b'hello', b'hello')
    >>> import shutil; shutil.rmtree(d)
    """
    path = Path(path)
    return gunzip_if_gz(read_file_bytes(path), path)


def read_file_bytes(path) -> bytes:
    """A file's bytes as they are on disk.

    Raises
    ------
    KitFileError
        The file is missing, is a folder, or is empty.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from kitlib.readers.files import read_file_bytes
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.json").write_bytes(b"{}")
    >>> read_file_bytes(d / "a.json")
    b'{}'
    >>> _ = (d / "empty.json").write_bytes(b"")
    >>> try:
    ...     read_file_bytes(d / "empty.json")
    ... except Exception as e:
    ...     print(type(e).__name__, "empty" in str(e))
    KitFileError True
    >>> import shutil; shutil.rmtree(d)
    """
    path = Path(path)
    if not path.exists():
        raise KitFileError(path, "no such file")
    if path.is_dir():
        raise KitFileError(path, "is a folder, not a file")
    data = path.read_bytes()
    if not data:
        raise KitFileError(path, "the file is empty (0 bytes); was the capture interrupted?")
    return data


def gunzip_if_gz(data: bytes, path) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic number, else as it is.

    Raises
    ------
    KitFileError
        A truncated or corrupt gzip stream, or one that holds no data (named ``path``).

    Examples
    --------
    >>> import gzip
    >>> from kitlib.readers.files import gunzip_if_gz
    >>> gunzip_if_gz(gzip.compress(b"abc"), "x.gz"), gunzip_if_gz(b"abc", "x")
    (b'abc', b'abc')
    """
    if data[:2] != b"\x1f\x8b":
        return data
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
