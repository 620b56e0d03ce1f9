"""Plain file helpers under every reader: bytes (gunzipped when gzipped), JSON, sha256.

The format readers and the bundle layer read files through these, so each damaged file gets
the same :class:`kitlib.errors.KitFileError`; ``path`` is the file that error names."""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import zlib
from pathlib import Path

from ..errors import KitFileError

try:  # msgspec decodes into Python objects without a document tree; the kit lists it.
    import msgspec as _msgspec
except ImportError:  # pragma: no cover
    _msgspec = None
try:  # orjson parses about 3x faster than the standard library; the kit lists it.
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency, but stay readable without it
    _orjson = None


def sha256_of(path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json_file(path):
    """Parse a ``.json`` or ``.json.gz`` file (KitFileError: missing, empty, truncated, invalid JSON)."""
    path = Path(path)
    return parse_json(read_bytes_maybe_gz(path), path)


def parse_json(raw: bytes, path):
    """Parse JSON bytes strictly: msgspec, then orjson for what it refuses (the standard library
    without either); integers beyond 64 bits stay integers.

    Strict is what RFC 8259 allows: UTF-8, no ``NaN``/``Infinity``, no lone UTF-16 surrogate
    escapes, nesting up to 1024 levels. KitFileError: where and why (:func:`json_error`)."""
    if _msgspec is not None:
        try:       # straight into Python objects: no whole-document tree first (about 55 MiB on a 20 MiB trace)
            return _msgspec.json.decode(raw)
        except (_msgspec.DecodeError, RecursionError):
            pass   # invalid, or what it refuses (1e999): orjson or json decides, and says where
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


def read_trace_events(path, cats=None) -> list:
    """The ``traceEvents`` list of a Chrome trace file, one dict per event as ``json`` gives it.

    Sources: docs/SOURCES.md#files-read-trace-events

    ``cats``: keep only events whose ``cat`` is one of these (``None`` keeps those without one),
    the others never becoming dicts. A bare list of events is accepted. KitFileError: a file
    :func:`read_bytes_maybe_gz` refuses, invalid JSON, or no ``traceEvents`` list."""
    path = Path(path)
    raw = read_bytes_maybe_gz(path)
    try:
        if cats is None:
            doc = _msgspec.json.decode(raw, type=_EventsOnly).traceEvents
        else:                  # each event's bytes, its cat read first: only the kept become dicts
            wanted = set(cats)
            heads = _msgspec.json.decode(raw, type=_RawEvents).traceEvents
            doc = [_msgspec.json.decode(e) for e in heads
                   if _msgspec.json.decode(e, type=_Cat).cat in wanted]
    except Exception:          # msgspec missing, or what only json reads, or an error: json says which
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise json_error(path, raw, e) from None
        if isinstance(doc, dict):
            doc = doc.get("traceEvents")
        if cats is not None and isinstance(doc, list):
            doc = [e for e in doc if isinstance(e, dict) and e.get("cat") in set(cats)]
    if not isinstance(doc, list):
        raise KitFileError(path, "not a Chrome trace: it has no traceEvents list")
    return doc


if _msgspec is not None:
    class _EventsOnly(_msgspec.Struct):
        """A trace's top-level object, only its events decoded."""
        traceEvents: list

    class _RawEvents(_msgspec.Struct):
        """A trace's top-level object, each event left as its JSON bytes."""
        traceEvents: list[_msgspec.Raw]

    class _Cat(_msgspec.Struct):
        """An event's category alone (``None`` where it has none)."""
        cat: object = None


def json_error(path, raw: bytes, err: BaseException | None = None) -> KitFileError:
    """The KitFileError for JSON bytes ``raw`` that did not parse: where, and why.

    ``err`` is what the parser raised; its position serves for what the standard library would
    accept or not reach (``NaN``, a lone surrogate, deep nesting). The message reads ``invalid
    JSON at line L, column C (byte N)[ (the file ends there: it looks cut off)]: reason`` or
    ``not UTF-8 text at …``. Never recurses: ``json``'s words are asked for ordinary syntax
    errors only."""
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
    """A file's bytes, gunzipped when gzipped (KitFileError: missing, a folder, empty, bad gzip)."""
    path = Path(path)
    return gunzip_if_gz(read_file_bytes(path), path)


def read_file_bytes(path) -> bytes:
    """A file's bytes as on disk (KitFileError: missing, a folder, empty)."""
    path = Path(path)
    check_regular_file(path)
    data = path.read_bytes()
    if not data:
        raise KitFileError(path, "the file is empty (0 bytes); was the capture interrupted?")
    return data


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular_file(path) -> os.stat_result:
    """The stat of a regular file (links followed); KitFileError, before opening, for a folder, a
    named pipe (a read waits for ever), a device (``/dev/zero`` never ends), a socket."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise KitFileError(path, "no such file") from None
    except OSError as e:
        raise KitFileError(path, f"cannot be read ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise KitFileError(path, "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise KitFileError(path, f"is {kind}, not a regular file: kitlib reads recordings from files only")
    return st


#: The most bytes :func:`gunzip_if_gz` inflates to (2 GiB): a larger trace could not be parsed in
#: memory anyway, and a "gzip bomb" (zeros compress ~1000:1) is refused before it fills it.
MAX_GUNZIPPED_BYTES = 2 << 30

_CHUNK_IN = 1 << 16                       # at most ~66 MiB out per step (deflate's ratio is ~1032:1)
_ZEROS = re.compile(rb"\x00*")


def gunzip_if_gz(data: bytes, path, limit_bytes: int | None = None) -> bytes:
    """``data`` gunzipped when it starts with the gzip magic number, else as it is.

    KitFileError: a truncated or corrupt stream, one without data, or one inflating past
    ``limit_bytes`` (default :data:`MAX_GUNZIPPED_BYTES`; checked every ~66 MiB inflated)."""
    if data[:2] != b"\x1f\x8b":
        return data
    limit = MAX_GUNZIPPED_BYTES if limit_bytes is None else limit_bytes
    view, n, pos, total, parts = memoryview(data), len(data), 0, 0, []
    try:
        while pos < n:                    # one gzip member after another, as gzip.decompress
            if data[pos:pos + 2] != b"\x1f\x8b":
                raise KitFileError(path, f"corrupt gzip: bytes {pos:,}-{n:,} after the gzip stream are "
                                         f"not gzip (they start with {data[pos:pos + 8]!r})")
            member = zlib.decompressobj(zlib.MAX_WBITS | 16)      # checks the header, CRC and length
            while not member.eof and pos < n:
                piece = member.decompress(view[pos:pos + _CHUNK_IN])
                pos = min(pos + _CHUNK_IN, n)
                total += len(piece)
                if total > limit:
                    raise KitFileError(
                        path, f"too large to inflate: it holds more than {limit:,} bytes, the limit (kitlib "
                              f"stopped at {total:,} bytes, inflated from {pos:,} of its {n:,} compressed "
                              f"bytes: {total / pos:,.0f}:1, where traces compress about 10:1); a gzip "
                              "bomb, or a trace too large to load")
                parts.append(piece)
            if not member.eof:
                raise KitFileError(path, "truncated gzip: the compressed stream ends early "
                                         "(the file was cut off while being written or copied)")
            pos -= len(member.unused_data)
            pos = _ZEROS.match(data, pos).end()                   # zero padding after a member
        out = b"".join(parts)
    except zlib.error as e:
        raise KitFileError(path, f"corrupt gzip: {e}") from None
    except MemoryError:
        raise KitFileError(path, f"not enough memory to inflate it ({total:,} bytes inflated from the "
                                 f"first {pos:,} of its {n:,} compressed bytes)") from None
    if not out:
        raise KitFileError(path, "the gzip file holds no data")
    return out
