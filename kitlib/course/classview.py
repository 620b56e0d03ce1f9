"""The learner's side of the instructor's live class view (issue 38; deploy/hub/classview/).
Each judged answer is sent, with the learner's hub token, only under JupyterHub
(``JUPYTERHUB_API_TOKEN``), with ``KITLIB_CLASS_VIEW_URL`` set by the hub (a loopback
address) and ``KITLIB_CLASS_VIEW`` not ``off``. A failed send waits at most
``KITLIB_CLASS_VIEW_TIMEOUT_S`` and logs one line to the kernel's stderr, once."""
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
    """The record sent for one judged answer: ``lesson``, ``question``, ``correct``, ``answer`` (200
    characters at most), ``trap`` and ``trap_text`` (:meth:`Question.trap_hit`); no name, no time."""
    m = re.match(r"\s*lesson\s+(\d+)", exercises.title or "", re.I)
    trap, text = question.trap_hit(verdict)
    given = verdict.given if verdict.given is not None else ""
    return {"lesson": m.group(1) if m else (exercises.title or "")[:40], "question": question.key,
            "correct": bool(verdict.correct), "answer": str(given)[:200], "trap": trap, "trap_text": text}


def send(exercises, question, verdict) -> bool:
    """Send one judged answer where the class view is on; True when stored. Never raises."""
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
