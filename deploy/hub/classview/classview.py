"""The instructor's live view of the class (issue 38): a JupyterHub-managed service (tornado),
started by the hub when deploy/hub/jupyterhub_config.py has KIT_HUB_CLASS_VIEW=1.

Every request is authenticated through the hub (HubOAuth: a hub token in the Authorization
header, or the OAuth cookie of a browser that logged in to the hub); the learner's name is the
token's owner, never a field of the request. Under the service's prefix (/services/classview/):

  POST api/attempts          a learner's kernel records one judged answer (kitlib/course/classview.py):
                             JSON lesson, question, correct, answer, trap, trap_text
  GET  api/learners/<name>   that learner's attempts (JSON): the learner themself, or an instructor
  GET  me                    the learner's own record (HTML)
  GET  (the prefix itself)   the instructor's page: per question, per learner, the clinic's cases
  GET  export.csv            one row per learner and question, for grading
  GET  oauth_callback        the hub's OAuth redirect (browsers)

No token, or one the hub does not know: 401 (a browser page without a login goes to the hub's
login instead). A token without access to this service, another learner's record, or an
instructor's page asked by a learner: 403. An instructor is a hub admin or a member of the hub
group KIT_CLASSVIEW_INSTRUCTORS_GROUP [instructors] (asked of the hub with this service's own
token, read:users and read:groups, kept 30 s).

Store: SQLite at KIT_CLASSVIEW_DB (the hub's state folder, root's only); attempts older than
KIT_CLASSVIEW_KEEP_DAYS [30] days are deleted at start and every hour. The instructor's page
reloads itself every KIT_CLASSVIEW_REFRESH_S [15] seconds (meta refresh).
"""
import csv
import html
import io
import json
import os
import sqlite3
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import httpclient, ioloop, web

PREFIX = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/classview/")
DB = os.environ.get("KIT_CLASSVIEW_DB", "classview.sqlite")
KEEP_DAYS = float(os.environ.get("KIT_CLASSVIEW_KEEP_DAYS", "30"))
REFRESH_S = int(os.environ.get("KIT_CLASSVIEW_REFRESH_S", "15"))
GROUP = os.environ.get("KIT_CLASSVIEW_INSTRUCTORS_GROUP", "instructors")
FIELDS = {"lesson": 40, "question": 80, "answer": 200, "trap": 80, "trap_text": 200}   # max characters


def connect(path=DB):
    db = sqlite3.connect(path)
    db.execute("""CREATE TABLE IF NOT EXISTS attempts (
        id INTEGER PRIMARY KEY, learner TEXT NOT NULL, lesson TEXT NOT NULL, question TEXT NOT NULL,
        correct INTEGER NOT NULL, first_try INTEGER NOT NULL, answer TEXT, trap TEXT, trap_text TEXT,
        time_s REAL NOT NULL)""")
    db.execute("CREATE INDEX IF NOT EXISTS by_learner ON attempts (learner, lesson, question)")
    db.commit()
    return db


def purge(db, keep_days=KEEP_DAYS):
    """Delete attempts older than ``keep_days``; returns how many."""
    n = db.execute("DELETE FROM attempts WHERE time_s < ?", (time.time() - keep_days * 86400,)).rowcount
    db.commit()
    return n


def rows(db, learner=None):
    sql = "SELECT learner, lesson, question, correct, first_try, answer, trap, trap_text, time_s FROM attempts"
    cur = db.execute(sql + (" WHERE learner = ?" if learner else "") + " ORDER BY id", (learner,) if learner else ())
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def per_learner_question(attempts):
    """{(learner, lesson, question): summary}: attempts, wrong_tries (before the first right),
    right, right_first_try, traps hit, first and last attempt (Unix s)."""
    out = {}
    for a in attempts:
        s = out.setdefault((a["learner"], a["lesson"], a["question"]), {
            "attempts": 0, "wrong_tries": 0, "right": False, "right_first_try": False, "traps": [],
            "first_s": a["time_s"], "last_s": a["time_s"], "last_correct": False})
        s["attempts"] += 1
        s["last_s"], s["last_correct"] = a["time_s"], bool(a["correct"])
        if a["correct"]:
            s["right_first_try"] = s["right_first_try"] or (not s["right"] and s["wrong_tries"] == 0)
            s["right"] = True
        elif not s["right"]:
            s["wrong_tries"] += 1
        if a["trap"] and a["trap"] not in s["traps"]:
            s["traps"].append(a["trap"])
    return out


def _when(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _table(head, body):
    e = html.escape
    return ("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body) + "</table>")


def class_page(attempts, now=None):
    """The instructor's page (HTML) from all attempts."""
    e = html.escape
    now = now or time.time()
    summ = per_learner_question(attempts)
    learners = sorted({a["learner"] for a in attempts})
    by_q = defaultdict(list)
    for a in attempts:
        by_q[(a["lesson"], a["question"])].append(a)
    qrows = []
    for (lesson, q), atts in sorted(by_q.items()):
        s = [v for (l, ls, qq), v in summ.items() if (ls, qq) == (lesson, q)]
        reached, first = len(s), sum(v["right_first_try"] for v in s)
        wrong = Counter(a["answer"] for a in atts if not a["correct"])
        traps = Counter(f"{a['trap_text'] or ''} [{a['trap']}]" for a in atts if not a["correct"] and a["trap"])
        qrows.append([e(lesson), f"<code>{e(q)}</code>", str(reached),
                      f"{first}/{reached} ({100 * first / reached:.0f} %)", str(sum(v["right"] for v in s)),
                      "; ".join(f"{e(w)} ×{n}" for w, n in wrong.most_common(3)) or "—",
                      "; ".join(f"{e(t)} ×{n}" for t, n in traps.most_common(3)) or "—"])
    lrows = []
    for name in learners:
        mine = {k[1:]: v for k, v in summ.items() if k[0] == name}
        last = max(mine.items(), key=lambda kv: kv[1]["last_s"])
        stuck = [f"<code>{e(ls)} {e(q)}</code> ({v['wrong_tries']} wrong)" for (ls, q), v in mine.items()
                 if not v["right"] and v["wrong_tries"] >= 2]
        lrows.append([e(name), str(len(mine)), str(sum(v["right"] for v in mine.values())),
                      str(sum(v["right_first_try"] for v in mine.values())),
                      f"<code>{e(last[0][0])} {e(last[0][1])}</code>, {(now - last[1]['last_s']) / 60:.0f} min ago"
                      + ("" if last[1]["last_correct"] else " (wrong)"),
                      ", ".join(stuck) or "—"])
    crows = []
    for name in learners:
        cases = sorted({q[:6] for (l, ls, q) in summ if l == name and ls == "13" and q.startswith("case_")
                        and q[6:7] == "_"})
        for case in cases:
            cells = []
            for part in ("cause", "evidence", "fix"):
                v = summ.get((name, "13", f"{case}_{part}"))
                cells.append("—" if v is None else "✓ first try" if v["right_first_try"] else
                             f"✓ after {v['wrong_tries']} wrong" if v["right"] else f"✗ ({v['wrong_tries']} wrong)")
            crows.append([e(name), e(case)] + cells)
    return f"""<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_S}"><title>Class view</title>
<style>body{{font-family:sans-serif;margin:1em}} table{{border-collapse:collapse;margin-bottom:1.5em}}
td,th{{border:1px solid #bbb;padding:3px 6px;text-align:left;vertical-align:top}}</style></head><body>
<h1>Class view</h1><p>{len(learners)} learners, {len(attempts)} attempts; updated {_when(now)} UTC
(reloads every {REFRESH_S} s). <a href="export.csv">Export for grading (CSV)</a></p>
<h2>Per question</h2>{_table(["lesson", "question", "learners reached", "right first try", "right", "commonest wrong answers", "misconceptions (traps) hit"], qrows)}
<h2>Per learner</h2>{_table(["learner", "questions reached", "right", "right first try", "last answer", "stuck on (2+ wrong, not yet right)"], lrows)}
<h2>Clinic (lesson 13), per case</h2>{_table(["learner", "case", "right cause", "right evidence", "right fix"], crows) if crows else "<p>No clinic answers yet.</p>"}
</body></html>"""


def export_csv(attempts):
    """One row per learner and question: learner, lesson, question, attempts, wrong_tries (before
    the first right), right, right_first_try (0/1), traps (ids, ';'), first_attempt_utc,
    last_attempt_utc."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["learner", "lesson", "question", "attempts", "wrong_tries", "right", "right_first_try",
                "traps", "first_attempt_utc", "last_attempt_utc"])
    for (name, lesson, q), v in sorted(per_learner_question(attempts).items()):
        w.writerow([name, lesson, q, v["attempts"], v["wrong_tries"], int(v["right"]), int(v["right_first_try"]),
                    ";".join(v["traps"]), _when(v["first_s"]), _when(v["last_s"])])
    return out.getvalue()


class Base(HubOAuthenticated, web.RequestHandler):
    """Who asks, through the hub: ``self.who`` (the hub's user model) or None."""
    _instructors = {}      # name -> (is instructor, when asked)

    async def prepare(self):
        self.who = await self.hub_auth.get_user(self, sync=False)   # token header, else the OAuth cookie
        if self.who and not self.hub_auth.check_scopes(self.hub_auth.access_scopes, self.who):
            raise web.HTTPError(403, "this token has no access to the class view")

    def get_current_user(self):
        return self.who

    def need_user(self):
        if not self.who or self.who.get("kind", "user") != "user":
            raise web.HTTPError(401, "a learner's hub token is required")
        return self.who["name"]

    async def is_instructor(self, name):
        known = self._instructors.get(name)
        if known and time.monotonic() - known[1] < 30:
            return known[0]
        auth = self.hub_auth
        r = await httpclient.AsyncHTTPClient().fetch(
            url_path_join(auth.api_url, "users", name), headers={"Authorization": f"token {auth.api_token}"},
            raise_error=False, request_timeout=10)
        model = json.loads(r.body) if r.code == 200 else {}
        ok = bool(model.get("admin")) or GROUP in model.get("groups", [])
        self._instructors[name] = (ok, time.monotonic())
        return ok

    async def need_instructor(self):
        name = self.need_user()
        if not await self.is_instructor(name):
            raise web.HTTPError(403, f"{name} is neither a hub admin nor in the group {GROUP!r}")

    @property
    def db(self):
        return self.settings["db"]


class Attempts(Base):
    def post(self):
        name = self.need_user()
        try:
            a = json.loads(self.request.body)
            assert isinstance(a, dict) and isinstance(a.get("correct"), bool)
            vals = {k: (None if a.get(k) is None else str(a[k])[:n]) for k, n in FIELDS.items()}
            assert vals["lesson"] and vals["question"]
        except (ValueError, AssertionError):
            raise web.HTTPError(400, "expected JSON with lesson, question, correct (true/false), answer, trap, "
                                     "trap_text") from None
        first = not self.db.execute("SELECT 1 FROM attempts WHERE learner=? AND lesson=? AND question=?",
                                    (name, vals["lesson"], vals["question"])).fetchone()
        self.db.execute("INSERT INTO attempts (learner, lesson, question, correct, first_try, answer, trap, "
                        "trap_text, time_s) VALUES (?,?,?,?,?,?,?,?,?)",
                        (name, vals["lesson"], vals["question"], int(a["correct"]), int(first), vals["answer"],
                         vals["trap"], vals["trap_text"], time.time()))
        self.db.commit()
        self.set_status(201)
        self.finish({"learner": name, "first_try": first})


class Learner(Base):
    async def get(self, learner):
        name = self.need_user()
        if learner != name and not await self.is_instructor(name):
            raise web.HTTPError(403, "a learner sees only their own record")
        self.finish({"learner": learner, "attempts": rows(self.db, learner)})


class Me(Base):
    @web.authenticated
    def get(self):
        name = self.need_user()
        body = [[html.escape(a["lesson"]), f"<code>{html.escape(a['question'])}</code>",
                 "right" if a["correct"] else "wrong", "yes" if a["first_try"] else "no",
                 html.escape(a["answer"] or ""), html.escape(a["trap_text"] or "—"), _when(a["time_s"])]
                for a in rows(self.db, name)]
        self.finish(f"<!doctype html><html><head><meta charset='utf-8'><title>My record</title></head><body>"
                    f"<h1>{html.escape(name)}: what the class view keeps of you</h1>"
                    + _table(["lesson", "question", "verdict", "first try", "answer", "misconception", "UTC"], body)
                    + "</body></html>")


class ClassPage(Base):
    @web.authenticated
    async def get(self):
        await self.need_instructor()
        self.finish(class_page(rows(self.db)))


class Export(Base):
    async def get(self):
        await self.need_instructor()
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", 'attachment; filename="classview.csv"')
        self.finish(export_csv(rows(self.db)))


def main():
    db = connect()
    os.chmod(DB, 0o600)
    print(f"classview: {purge(db)} attempts older than {KEEP_DAYS:g} days deleted from {DB}", flush=True)
    app = web.Application([
        (PREFIX, ClassPage),
        (url_path_join(PREFIX, "me"), Me),
        (url_path_join(PREFIX, "export.csv"), Export),
        (url_path_join(PREFIX, "api/attempts"), Attempts),
        (url_path_join(PREFIX, r"api/learners/([^/]+)"), Learner),
        (url_path_join(PREFIX, "oauth_callback"), HubOAuthCallbackHandler),
    ], db=db, cookie_secret=os.urandom(32))
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    app.listen(url.port, url.hostname)
    ioloop.PeriodicCallback(lambda: purge(db), 3600 * 1000).start()
    print(f"classview: listening on {url.hostname}:{url.port}{PREFIX}", flush=True)
    ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
