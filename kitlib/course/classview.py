"""The learner's side of the instructor's live view of the class (issue 38; the service is
deploy/hub/classview/). Each judged answer (right or wrong, not a ``None`` or an answer outside
the choices) goes to the class view, with the learner's own hub token, only where:

* the kernel runs under JupyterHub (``JUPYTERHUB_API_TOKEN`` is set in the single-user
  server's environment, which the kernel inherits), and
* the class has the view on: the hub's config sets ``KITLIB_CLASS_VIEW_URL`` (a loopback
  address of the hub's own machine: nothing leaves the hub), and
* the learner has not switched it off (``KITLIB_CLASS_VIEW=off``, e.g. ``%env
  KITLIB_CLASS_VIEW=off`` in a cell).

Anywhere else nothing is sent and nothing changes. A failed send (service down, slow, refused)
never disturbs the learner: it waits at most ``KITLIB_CLASS_VIEW_TIMEOUT_S`` (default 2 s), and
one line goes to the kernel's own stderr (the server's log, not the notebook), once per kernel.
stdlib only (urllib).
"""
from __future__ import annotations

import json
import os
import re
import sys
import urllib.request

from ..settings import is_off, value

_warned = False


def target():
    """``(url of the attempts endpoint, token)`` where an attempt is to be sent, else None."""
    url = value("KITLIB_CLASS_VIEW_URL") or ""
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "").strip()
    if not url or not token or is_off("KITLIB_CLASS_VIEW"):
        return None
    return url.rstrip("/") + "/api/attempts", token


def attempt(exercises, question, verdict) -> dict:
    """The record sent for one judged answer: ``lesson`` (``"02"``, from the exercises' title
    "Lesson 02 — …"), ``question`` (key), ``correct`` (bool), ``answer`` (as the verdict shows
    it, 200 characters at most), ``trap`` and ``trap_text`` (the misconception the wrong
    answer fell into: :meth:`kitlib.course.exercises.Question.trap_hit`). The time
    is the service's, on arrival; the learner is not in it: the service takes the name from the
    token."""
    m = re.match(r"\s*lesson\s+(\d+)", exercises.title or "", re.I)
    trap, text = question.trap_hit(verdict)
    given = verdict.given if verdict.given is not None else ""
    return {"lesson": m.group(1) if m else (exercises.title or "")[:40], "question": question.key,
            "correct": bool(verdict.correct), "answer": str(given)[:200], "trap": trap, "trap_text": text}


def send(exercises, question, verdict) -> bool:
    """Send one judged answer to the class view where it is on (see the module); True when the
    service stored it. Never raises: a failure is one line on the kernel's stderr, once."""
    global _warned
    where = target()
    if where is None or verdict.correct is None:
        return False
    url, token = where
    try:
        body = json.dumps(attempt(exercises, question, verdict)).encode()
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Authorization": f"token {token}", "Content-Type": "application/json"})
        timeout_s = float(value("KITLIB_CLASS_VIEW_TIMEOUT_S"))
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return 200 <= r.status < 300
    except Exception as e:   # noqa: BLE001 (whatever goes wrong, the learner's check goes on)
        if not _warned:
            _warned = True
            try:
                print(f"kitlib class view: an attempt was not sent to {url} ({type(e).__name__}: {e}); "
                      "later failures are not logged", file=sys.__stderr__, flush=True)
            except Exception:   # noqa: BLE001 (no stderr at all)
                pass
        return False
