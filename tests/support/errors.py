"""A refused file, as the readers must refuse it."""
import pytest


def refused(load, path, exc, *words) -> str:
    """``load(path)`` raises ``exc`` whose message names ``path`` and holds each of ``words``;
    returns the message."""
    with pytest.raises(exc) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg
    for w in words:
        assert w in msg, msg
    return msg
