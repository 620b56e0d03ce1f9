"""The instructor's live view of the class (issue 38): the hub service deploy/hub/classview/ and
the learner's side, kitlib/course/classview.py.

With a REAL hub (deploy/hub/jupyterhub_config.py with KIT_HUB_CLASS_VIEW=1, the hub starting
its proxy and the service, on 127.0.0.1), but a lighter one than tests/course/test_hub.py's: users and
tokens made through the REST API, no servers spawned (the service's access rules need tokens,
not servers), so the config's PAM login is swapped for JupyterHub's dummy one (the only
change). The learners answer through ``ex.check`` on lesson 02's and lesson 13's real
questions, in this process, with each learner's own token as JUPYTERHUB_API_TOKEN (as their
kernel has it); tests/course/test_hub.py checks the same path from the learners' kernels.

Checked: no token or a forged one gets 401, another learner's token 403 and nothing of the
other's record; the instructor's page and the export refused to a learner (403), shown to the
admin and to a member of the group "instructors"; the page in Chromium, after a real login
through the hub's OAuth, shows per question the share right on the first try, the wrong
answers, the misconception, and reloads itself with a later answer; the CSV export's rows.
Without a hub nothing is sent; a send that fails costs at most its timeout and one log line.

Needs jupyterhub, configurable-http-proxy (and Chromium with Playwright for the browser part):
skipped with the reason when missing, unless CI is set, where it fails.
"""
import csv
import io
import os
import shutil
import time
import urllib.request
import uuid

import pytest

from support.hub_support import CONFIG, Hub, free_port

pytestmark = [pytest.mark.xdist_group("hub")]

SERVICE = "/services/classview"
LEARNERS = ["cv-ana", "cv-ben", "cv-cy"]
TEACHER, ASSISTANT = "cv-teacher", "cv-assistant"
CLINIC_CAUSE_WRONG = "the loader's workers cannot keep up (a costly transform)"


def _why_not():
    why = []
    for mod in ("jupyterhub", "requests"):
        try:
            __import__(mod)
        except ImportError:
            why.append(f"python package {mod} not installed (pip install -e '.[test,hub]')")
    if not shutil.which("configurable-http-proxy"):
        why.append("configurable-http-proxy not on PATH (npm install -g configurable-http-proxy@5)")
    return why


def _need(why):
    if why:
        if os.environ.get("CI"):
            pytest.fail("the class view test cannot run here, and CI must run it: " + "; ".join(why))
        pytest.skip("; ".join(why))


@pytest.fixture(scope="module")
def class_hub(tmp_path_factory):
    """A hub with the class view on, 3 learners, an admin and an assistant in "instructors",
    each with a token (scope: the class view only, like the server token a kernel has)."""
    _need(_why_not())
    import requests
    state = tmp_path_factory.mktemp("classview-hub")
    config = state / "config.py"
    config.write_text(f"c = get_config()  # noqa\nload_subconfig({str(CONFIG)!r})\n"
                      "c.JupyterHub.authenticator_class = 'dummy'   # users come from the REST API\n"
                      "c.Authenticator.allow_all = False\n")
    ports = {k: free_port() for k in ("public", "hub", "proxy_api", "classview")}
    admin_token = uuid.uuid4().hex
    env = {"KIT_HUB_IP": "127.0.0.1", "KIT_HUB_PORT": str(ports["public"]), "KIT_HUB_HUB_PORT": str(ports["hub"]),
           "KIT_HUB_PROXY_API_PORT": str(ports["proxy_api"]), "KIT_HUB_EXTERNAL_PROXY": "0",
           "CONFIGPROXY_AUTH_TOKEN": uuid.uuid4().hex, "KIT_HUB_STATE_DIR": str(state / "state"),
           "KIT_HUB_MODE": "replay", "KIT_HUB_API_TOKEN": admin_token, "KIT_HUB_ADMINS": TEACHER,
           "KIT_HUB_INSTRUCTORS": ASSISTANT, "KIT_HUB_CLASS_VIEW": "1",
           "KIT_HUB_CLASS_VIEW_PORT": str(ports["classview"]), "KIT_HUB_CLASS_VIEW_REFRESH_S": "2"}
    hub = Hub(state, ports, admin_token, env, config=config)
    try:
        print(f"\nhub up in {hub.start():.1f} s")
        r = hub.api("POST", "/users", json={"usernames": LEARNERS})
        assert r.status_code == 201, r.text
        hub.tokens = {}
        for name in LEARNERS + [TEACHER, ASSISTANT]:
            r = hub.api("POST", f"/users/{name}/tokens", json={
                "scopes": ["access:services!service=classview"], "note": "test_classview", "expires_in": 3600})
            assert r.status_code == 201, (name, r.text)
            hub.tokens[name] = r.json()["token"]
        hub.direct = f"http://127.0.0.1:{ports['classview']}{SERVICE}/"   # KITLIB_CLASS_VIEW_URL
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:       # the service is up and the proxy routes to it
            try:
                r = requests.get(f"{hub.url}{SERVICE}/api/learners/{LEARNERS[0]}", timeout=5,
                                 headers={"Authorization": f"token {hub.tokens[LEARNERS[0]]}"})
                if r.status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"the class view did not answer in 60 s:\n{hub.log()}")
        with pytest.MonkeyPatch.context() as mp:      # the learners answer (PLAN, below)
            for name in LEARNERS:
                got = _answer(hub, mp, name, [(ls, k, a) for ls, k, a, _ in PLAN[name]])
                assert got == [ok for *_, ok in PLAN[name]], (name, got)
        yield hub
    finally:
        if hub.proc:
            print(f"--- end of the hub's log ({hub.log_path}) ---\n{hub.log(3000)}")
        hub.stop()           # the hub stops the proxy and the service it started


def _get(hub, path, token=None, **kw):
    import requests
    headers = {"Authorization": f"token {token}"} if token else {}
    return requests.get(f"{hub.url}{SERVICE}{path}", headers=headers, timeout=30, allow_redirects=False, **kw)


def _answer(hub, monkeypatch, name, answers):
    """``name`` checks ``answers`` [(lesson, key, answer)] with fresh exercises of lessons 02
    and 13, as their kernel would: JUPYTERHUB_API_TOKEN is theirs, KITLIB_CLASS_VIEW_URL the
    hub's. Returns the verdicts' ``correct``."""
    from kitlib import course
    from kitlib.course import exercises
    monkeypatch.setenv("KITLIB_CLASS_VIEW_URL", hub.direct)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", hub.tokens[name])
    ex = {"02": exercises.lesson02(course.lesson_capture("profiler_5step")), "13": exercises.lesson13(letters=["a"])}
    return [ex[lesson].check(key, given).correct for lesson, key, given in answers]


#: What each learner answers: (lesson, question, answer, right?) — ben falls into lesson 02's
#: "one operator = one kernel" trap, is wrong once more, then right; he is stuck on
#: device_time_us (a trap, then a plain wrong number) and needs two tries at the clinic's cause.
PLAN = {
    "cv-ana": [("02", "launch_count", 3, True), ("02", "device_time_us", 787.618, True),
               ("13", "case_a_cause", "a memory-layout mismatch: channels-first tensors inside a channels-last model", True),
               ("13", "case_a_evidence", 49, True),
               ("13", "case_a_fix", "keep every tensor channels_last (no plain .contiguous() between blocks)", True)],
    "cv-ben": [("02", "launch_count", 1, False), ("02", "launch_count", 5, False), ("02", "launch_count", 3, True),
               ("02", "device_time_us", 47.498, False), ("02", "device_time_us", 100, False),
               ("13", "case_a_cause", CLINIC_CAUSE_WRONG, False),
               ("13", "case_a_cause", "a memory-layout mismatch: channels-first tensors inside a channels-last model", True)],
    "cv-cy": [("02", "launch_count", 3, True)],
}


def test_access_rules_and_what_each_one_sees(class_hub):
    hub = class_hub
    ana, ben, cy = LEARNERS
    tok = hub.tokens
    store = hub.state / "state" / "classview.sqlite"
    assert oct(store.stat().st_mode & 0o777) == "0o600" and oct(store.parent.stat().st_mode & 0o777) == "0o700"
    # no token, or one the hub never issued: 401, on every learner endpoint and the export
    forged = uuid.uuid4().hex
    import requests
    for token in (None, forged):
        for path in (f"/api/learners/{ana}", "/export.csv"):
            r = _get(hub, path, token)
            print(f"GET {path} with {'no' if token is None else 'a forged'} token: {r.status_code}")
            assert r.status_code == 401, (path, r.status_code, r.text[:300])
        r = requests.post(f"{hub.url}{SERVICE}/api/attempts", timeout=30,
                          headers={"Authorization": f"token {token}"} if token else {},
                          json={"lesson": "02", "question": "launch_count", "correct": True, "answer": "3"})
        assert r.status_code == 401, r.status_code
    # a browser without a login goes to the hub's OAuth; a forged token is no login either
    r = _get(hub, "/")
    assert r.status_code == 302 and "/hub/api/oauth2/authorize" in r.headers["Location"], r.headers
    # another learner's token: 403 on the other's record, the instructor's page, the export
    for path in (f"/api/learners/{ana}", "/", "/export.csv"):
        r = _get(hub, path, tok[ben])
        assert r.status_code == 403, (path, r.status_code)
    # the owner's name comes from the token, never from the request
    r = requests.post(f"{hub.url}{SERVICE}/api/attempts", headers={"Authorization": f"token {tok[cy]}"}, timeout=30,
                      json={"lesson": "02", "question": "launch_count", "correct": True, "answer": "3",
                            "learner": ana})
    assert r.status_code == 201 and r.json() == {"learner": cy, "first_try": False}, r.text
    # each learner's own record holds their attempts only
    for name in (ana, ben, cy):
        r = _get(hub, f"/api/learners/{name}", tok[name])
        assert r.status_code == 200
        mine = r.json()["attempts"]
        expected = len(PLAN[name]) + (name == cy)          # cy's second answer, just above
        print(f"{name}: {len(mine)} attempts stored, {expected} made")
        assert len(mine) == expected and {a["learner"] for a in mine} == {name}
        page = _get(hub, "/me", tok[name]).text
        assert name in page and not any(other in page for other in LEARNERS if other != name)
    ben_rec = _get(hub, f"/api/learners/{ben}", tok[ben]).json()["attempts"]
    assert CLINIC_CAUSE_WRONG not in _get(hub, f"/api/learners/{ana}", tok[ana]).text
    assert [a["first_try"] for a in ben_rec if a["question"] == "launch_count"] == [1, 0, 0]
    traps = [(a["question"], a["trap"], a["trap_text"]) for a in ben_rec if a["trap"]]
    print("ben's traps:", traps)
    assert ("launch_count", "one_op_one_kernel", "one operator = one kernel") in traps
    assert ("device_time_us", "launch_is_kernel_time", "launch time = kernel time") in traps
    assert ("case_a_cause", "case_a_cause.trap2") in [t[:2] for t in traps]   # the clinic's own trap, by place
    # the instructors: the hub's admin, and a member of the group "instructors"
    for name in (TEACHER, ASSISTANT):
        for path in ("/", f"/api/learners/{ana}", "/export.csv"):
            assert _get(hub, path, tok[name]).status_code == 200, (name, path)
    # the export: one row per learner and question
    rows = list(csv.DictReader(io.StringIO(_get(hub, "/export.csv", tok[TEACHER]).text)))
    ben_lc = next(r for r in rows if r["learner"] == ben and r["question"] == "launch_count")
    print("export, ben's launch_count:", ben_lc)
    assert (ben_lc["attempts"], ben_lc["wrong_tries"], ben_lc["right"], ben_lc["right_first_try"]) == ("3", "2", "1", "0")
    assert ben_lc["traps"] == "one_op_one_kernel"
    assert len(rows) == len({(n, ls, k) for n in PLAN for ls, k, *_ in PLAN[n]})


def test_the_instructors_page_in_chromium(class_hub, monkeypatch, tmp_path):
    """The admin logs in through the hub (OAuth) in Chromium; the page shows lesson 02's launch_count as the learners answered
    it, and, reloading itself, cy's later answer to a question nobody else has answered."""
    from support.browser import CHROMIUM, CHROMIUM_ARGS, browser_required, why_no_browser
    why = why_no_browser()
    if why:
        _need([why] if (os.environ.get("CI") or browser_required()) else [])
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    hub = class_hub
    # the independent figure: from the plan, the share of learners right on their first try
    firsts = {n: next(ok for ls, k, a, ok in PLAN[n] if k == "launch_count") for n in PLAN}
    print(f"launch_count, from the plan: {sum(firsts.values())} of {len(firsts)} right on the first try")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{hub.url}{SERVICE}/")
            page.fill("input[name=username]", TEACHER)
            page.fill("input[name=password]", "any")
            page.click("[type=submit]")
            page.wait_for_selector("text=Per question")
            per_q = page.locator("h2:has-text('Per question') + table tr")
            row = per_q.filter(has_text="launch_count").inner_text()
            print("the page's launch_count row:", row.replace("\t", " | "))
            cells = row.split("\t")
            assert cells[:5] == ["02", "launch_count", "3", "2/3 (67 %)", "3"], cells
            assert "1 ×1" in cells[5] and "5 ×1" in cells[5]
            assert "one operator = one kernel [one_op_one_kernel] ×1" in cells[6]
            ben = page.locator("h2:has-text('Per learner') + table tr", has_text="cv-ben").inner_text()
            assert "device_time_us (2 wrong)" in ben, ben
            clinic = [r.split("\t") for r in page.locator("h2:has-text('Clinic') + table tr").all_inner_texts()]
            print("clinic table:", clinic)
            assert ["cv-ana", "case_a", "✓ first try", "✓ first try", "✓ first try"] in clinic
            assert ["cv-ben", "case_a", "✓ after 1 wrong", "—", "—"] in clinic
            # a later answer shows up without the instructor reloading (meta refresh, 2 s here)
            _answer(hub, monkeypatch, "cv-cy", [("02", "kernel_after_op", False)])
            page.wait_for_selector("tr:has-text('kernel_after_op')", timeout=15_000)
            assert per_q.filter(has_text="kernel_after_op").inner_text().split("\t")[2:4] == ["1", "0/1 (0 %)"]
            page.screenshot(path=str(tmp_path / "classview.png"), full_page=True)
        finally:
            browser.close()


def test_nothing_is_sent_outside_a_hub(monkeypatch):
    """No KITLIB_CLASS_VIEW_URL or no JUPYTERHUB_API_TOKEN (a laptop, CI, a plain Jupyter), or
    the learner switched it off: ex.check judges as before and opens no connection."""
    from kitlib.course import classview
    from kitlib.course.exercises import Exercises, Question, misconception
    calls = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: calls.append(a) or 1 / 0)
    ex = Exercises("Lesson 02 — your turn", [Question("n", "How many?", 3, "three", kind="compute",
                                                      traps=[misconception("one_op_one_kernel", 1)])])
    for env in ({}, {"KITLIB_CLASS_VIEW_URL": "http://127.0.0.1:9/services/classview/"},
                {"JUPYTERHUB_API_TOKEN": "t"},
                {"KITLIB_CLASS_VIEW_URL": "http://127.0.0.1:9/", "JUPYTERHUB_API_TOKEN": "t", "KITLIB_CLASS_VIEW": "off"}):
        for k in ("KITLIB_CLASS_VIEW_URL", "JUPYTERHUB_API_TOKEN", "KITLIB_CLASS_VIEW"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert classview.target() is None
        v = ex.check("n", 1)
        assert v.correct is False and "one operator = one kernel" in v.message
    assert calls == []
    # where it is on, the attempt holds the misconception's key and title, and no learner name
    q = ex["n"]
    assert classview.attempt(ex, q, ex.check("n", 1)) == {
        "lesson": "02", "question": "n", "correct": False, "answer": "1", "trap": "one_op_one_kernel",
        "trap_text": "one operator = one kernel"}
    # a question's own trap is named by its place; found in a predict verdict too (tidied spaces)
    pex = Exercises("Lesson 01 — your prediction", [Question("p", "Guess?", 3, "three", kind="predict",
                                                             traps=[(4, "off by one"), (5, "you counted  the   syncs")])])
    assert pex["p"].trap_hit(pex.check("p", 5)) == ("p.trap2", "you counted  the   syncs")
    assert pex["p"].trap_hit(pex.check("p", 3)) == (None, None)


def test_a_failed_send_costs_its_timeout_and_one_log_line(monkeypatch, capfd):
    """The service is down (nothing listens) or does not answer (a socket that accepts and
    says nothing): every check still gets its verdict, each send gives up after
    KITLIB_CLASS_VIEW_TIMEOUT_S, and the kernel's stderr (the server's log) gets one line."""
    import socket
    from kitlib.course import classview
    from kitlib.course.exercises import Exercises, Question
    monkeypatch.setattr(classview, "_warned", False)
    ex = Exercises("Lesson 02 — your turn", [Question("n", "How many?", 3, "three", kind="compute")])
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    took = []
    try:
        monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "t")
        monkeypatch.setenv("KITLIB_CLASS_VIEW_TIMEOUT_S", "0.5")
        for url in (f"http://127.0.0.1:{free_port()}/services/classview/",
                    f"http://127.0.0.1:{silent.getsockname()[1]}/services/classview/"):
            monkeypatch.setenv("KITLIB_CLASS_VIEW_URL", url)
            for given in (2, 3):
                t0 = time.monotonic()
                v = ex.check("n", given)
                took.append((url, given, time.monotonic() - t0))
                assert v.correct is (given == 3) and took[-1][2] < 2.0
    finally:
        silent.close()
    err = capfd.readouterr().err
    with capfd.disabled():
        for url, given, s in took:
            print(f"{url}: check({given}) took {s:.2f} s (timeout 0.5 s)")
        print(err)
    assert err.count("kitlib class view: an attempt was not sent") == 1


def test_the_config_wires_the_class_view(tmp_path, monkeypatch):
    """KIT_HUB_CLASS_VIEW=1: the service with its command, store and role; every user and
    every server token may reach it; the kernels get its loopback URL. Off: none of it."""
    if not os.environ.get("CI"):
        pytest.importorskip("jupyterhub")
    from traitlets.config.loader import PyFileConfigLoader
    monkeypatch.setenv("KIT_HUB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("KIT_HUB_MODE", "replay")
    monkeypatch.setenv("KIT_HUB_CLASS_VIEW_PORT", "8099")
    monkeypatch.setenv("KIT_HUB_INSTRUCTORS", "tara, tom")
    for on in ("0", "1"):
        monkeypatch.setenv("KIT_HUB_CLASS_VIEW", on)
        cfg = PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()
        services = {s["name"]: s for s in cfg.JupyterHub.services}
        if on == "0":
            assert "classview" not in services and "KITLIB_CLASS_VIEW_URL" not in cfg.Spawner.environment
            continue
        cv = services["classview"]
        assert cv["url"] == "http://127.0.0.1:8099" and os.path.isfile(cv["command"][1])
        assert cv["environment"]["KIT_CLASSVIEW_DB"] == str(tmp_path / "state" / "classview.sqlite")
        assert cfg.Spawner.environment["KITLIB_CLASS_VIEW_URL"] == "http://127.0.0.1:8099/services/classview/"
        assert "access:services!service=classview" in cfg.Spawner.server_token_scopes
        roles = {r["name"]: r for r in cfg.JupyterHub.load_roles}
        assert roles["user"]["scopes"] == ["self", "access:services!service=classview"]
        assert roles["classview"]["scopes"] == ["read:users", "read:groups"]
        assert cfg.JupyterHub.load_groups == {"instructors": {"users": ["tara", "tom"]}}


def test_old_attempts_are_deleted_and_first_tries_counted(tmp_path):
    """The store keeps KIT_CLASSVIEW_KEEP_DAYS days (the purge at start and every hour); the
    export's wrong_tries count the wrong tries before the first right one only."""
    if not os.environ.get("CI"):
        pytest.importorskip("jupyterhub")
    import importlib.util
    spec = importlib.util.spec_from_file_location("classview_service", CONFIG.parent / "classview" / "classview.py")
    cv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cv)
    db = cv.connect(str(tmp_path / "cv.sqlite"))
    now = time.time()
    for learner, correct, age_days in (("ana", 0, 31), ("ana", 0, 1), ("ana", 1, 1), ("ana", 0, 0)):
        db.execute("INSERT INTO attempts (learner, lesson, question, correct, first_try, answer, time_s) "
                   "VALUES (?, '02', 'launch_count', ?, 0, 'x', ?)", (learner, correct, now - age_days * 86400))
    assert cv.purge(db, keep_days=30) == 1
    rows = list(csv.DictReader(io.StringIO(cv.export_csv(cv.rows(db)))))
    print(rows)
    assert len(rows) == 1 and (rows[0]["attempts"], rows[0]["wrong_tries"], rows[0]["right"],
                               rows[0]["right_first_try"]) == ("3", "1", "1", "0")
