"""kitlib.readers.files: every JSON file that does not parse gets where and why (issue 17).

orjson refuses NaN/Infinity, lone surrogate escapes, invalid UTF-8 and nesting deeper
than 1024 levels; each gets a message with the line, column, byte and the reason, and
nothing recurses (args nested thousands of levels deep used to make the standard
library's re-parse raise RecursionError).
"""
import gzip
import sys

import pytest

from kitlib.errors import KitFileError
from kitlib.readers.files import json_error, parse_json, read_json_file


def _refused(tmp_path, raw: bytes, *words, gz=False):
    p = tmp_path / ("bad.json.gz" if gz else "bad.json")
    p.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(KitFileError) as info:
        read_json_file(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}: ")
    for w in words:
        assert w in msg, msg
    return msg


NL = b"\n"
EVENT = b'{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": '


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_say_where_and_why(tmp_path, literal):
    raw = EVENT + literal + b"}]}"
    byte = len(EVENT) + (1 if literal.startswith(b"-") else 0)
    _refused(tmp_path, raw, f"line 1, column {byte + 1} (byte {byte})",
             "NaN and Infinity are not JSON values")


def test_lone_surrogate_escape(tmp_path):
    raw = b'{"traceEvents": [],\n "deviceProperties": [{"name": "H\\ud800 200"}]}'
    byte = raw.index(b"\\ud800")
    col = byte - raw.index(NL)
    _refused(tmp_path, raw, f"line 2, column {col} (byte {byte})",
             "lone UTF-16 surrogate", gz=True)


def test_lone_surrogate_position_counts_bytes_after_non_ascii(tmp_path):
    raw = '{"é€": "\\udc00"}'.encode()
    byte = raw.index(b"\\")
    _refused(tmp_path, raw, f"(byte {byte})", "lone UTF-16 surrogate")


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xed\xa0\x80", b"\xc3"])
def test_invalid_utf8_is_reachable_and_located(tmp_path, bad):
    # The "not UTF-8" branch was unreachable while orjson was installed.
    raw = b'{"traceEvents": [],\n "x": "' + bad + b'"}'
    byte = raw.index(bad)
    col = byte - raw.index(NL)
    _refused(tmp_path, raw, "not UTF-8 text", f"line 2, column {col} (byte {byte})",
             bad[:1].hex())


@pytest.mark.parametrize("depth", [1025, 5000, 50000])
def test_deep_nesting_does_not_recurse(tmp_path, depth):
    raw = b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * depth + b"]" * depth + b"}]}"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)          # a re-parse that recursed would fail at once
    try:
        msg = _refused(tmp_path, raw, "nest deeper than 1024 levels", "byte ")
    finally:
        sys.setrecursionlimit(limit)
    assert "cut off" not in msg


def test_ordinary_errors_keep_the_standard_library_words(tmp_path):
    text = '{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2,}]}'
    msg = _refused(tmp_path, text.encode(), f"(byte {text.index(',}') + 1})",
                   "Expecting property name")
    assert "cut off" not in msg
    _refused(tmp_path, b"{\"traceEvents\": [1, 2", "cut off", "byte 21")


def test_json_error_helper_without_an_exception():
    err = json_error("t.json", b'{"a": NaN}')
    assert isinstance(err, KitFileError) and "invalid JSON" in str(err)
    assert parse_json(b'{"a": [1, 2.5, "\\u00e9"]}', "t.json") == {"a": [1, 2.5, "é"]}
