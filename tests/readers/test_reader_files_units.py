"""``kitlib/readers/files.py`` function by function: hashes, JSON with its errors, gzip and its
limit, regular files only. These were the module's ``Examples`` (issue 39: tests, not
reading); each assertion is one of their shown outputs."""
from __future__ import annotations

import gzip

import pytest

from kitlib.errors import KitFileError
from kitlib.readers.files import (check_regular_file, gunzip_if_gz, json_error, parse_json,
                                  read_bytes_maybe_gz, read_file_bytes, read_json_file,
                                  read_trace_events, sha256_of)


def _raised(excinfo):
    """The exception as a traceback's last line shows it: its class, by name, and its text."""
    return type(excinfo.value).__module__ + "." + type(excinfo.value).__name__, str(excinfo.value)


def test_sha256_of(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"abc")
    assert sha256_of(p)[:16] == "ba7816bf8f01cfea"


def test_read_json_file_gzipped_and_truncated(tmp_path):
    p = tmp_path / "doc.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [], "schemaVersion": 1}'))
    assert read_json_file(p) == {"traceEvents": [], "schemaVersion": 1}
    p.write_bytes(b'{"traceEvents": [')
    with pytest.raises(Exception) as e:
        read_json_file(p)
    assert type(e.value).__name__ == "KitFileError"


def test_parse_json_and_its_error():
    assert parse_json(b'{"a": 1}', "x.json") == {"a": 1}
    with pytest.raises(KitFileError) as e:
        parse_json(b'{"a": }', "x.json")
    assert _raised(e) == ("kitlib.errors.KitFileError",
                          "x.json: invalid JSON at line 1, column 7 (byte 6): Expecting value")


def test_read_trace_events_keeps_only_the_events(tmp_path):
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1.5}], "x": [1]}'))
    assert read_trace_events(p) == [{"ph": "X", "ts": 1.5}]


def test_json_error_names_line_column_and_byte():
    assert str(json_error("doc.json", b'{"a": 1, "b": }')) == (
        "doc.json: invalid JSON at line 1, column 15 (byte 14): Expecting value")


def test_read_bytes_maybe_gz(tmp_path):
    (tmp_path / "a.gz").write_bytes(gzip.compress(b"hello"))
    (tmp_path / "b.txt").write_bytes(b"hello")
    assert (read_bytes_maybe_gz(tmp_path / "a.gz"), read_bytes_maybe_gz(tmp_path / "b.txt")) == (
        b"hello", b"hello")


def test_read_file_bytes_refuses_an_empty_file(tmp_path):
    (tmp_path / "a.json").write_bytes(b"{}")
    assert read_file_bytes(tmp_path / "a.json") == b"{}"
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(Exception) as e:
        read_file_bytes(tmp_path / "empty.json")
    assert (type(e.value).__name__, "empty" in str(e.value)) == ("KitFileError", True)


def test_check_regular_file_refuses_a_device():
    with pytest.raises(KitFileError) as e:
        check_regular_file("/dev/zero")
    assert _raised(e) == ("kitlib.errors.KitFileError",
                          "/dev/zero: is a character device, not a regular file: kitlib reads "
                          "recordings from files only")


def test_gunzip_if_gz_and_its_limit():
    assert (gunzip_if_gz(gzip.compress(b"abc"), "x.gz"), gunzip_if_gz(b"abc", "x")) == (b"abc", b"abc")
    with pytest.raises(Exception) as e:
        gunzip_if_gz(gzip.compress(bytes(10**6)), "zeros.gz", limit_bytes=10**5)
    assert " ".join(str(e.value)[:105].split()) == (                    # as NORMALIZE_WHITESPACE
        "zeros.gz: too large to inflate: it holds more than 100,000 bytes, "
        "the limit (kitlib stopped at 1,000,000")
