"""JupyterHub for a whole class on ONE server (issue 38): each learner a system user with a home
and processes of their own, limits per learner, idle servers culled, the lessons copied into
each home on first spawn. Run as root:  jupyterhub -f deploy/hub/jupyterhub_config.py
(docs/TEACHING_A_CLASS.md has the steps; tests/course/test_hub.py runs a real hub with this file).

Settings (environment variables; default in brackets)
-----------------------------------------------------
KIT_HUB_IP [0.0.0.0]            address learners' browsers reach (the proxy's public side)
KIT_HUB_PORT [8000]             the proxy's public port
KIT_HUB_HUB_PORT [8081]         the hub's own port (127.0.0.1 only; the proxy forwards to it)
KIT_HUB_PROXY_API_PORT [8001]   configurable-http-proxy's REST API (127.0.0.1 only)
KIT_HUB_EXTERNAL_PROXY [0]      1: configurable-http-proxy runs as a service of its own (started
                                before the hub with the same CONFIGPROXY_AUTH_TOKEN), so that a hub
                                restart never drops a learner's connection; 0: the hub starts it
KIT_HUB_STATE_DIR [/srv/kithub] the hub's database and cookie secret (kept across restarts)
KIT_HUB_ADMINS []               comma-separated admin user names (the instructor)
KIT_HUB_GROUP [kitlearners]     the system group whose members may log in (deploy/hub/add_learners.sh)
KIT_HUB_MEM_LIMIT [2G]          memory per learner, all their processes together (server, kernels)
KIT_HUB_CPU_LIMIT [1.0]         CPU cores per learner (CFS quota), all their processes together
KIT_HUB_IDLE_TIMEOUT [3600]     s without activity before the culler stops a learner's server
KIT_HUB_START_TIMEOUT [600]     s the hub waits for a learner's server to start and answer
KIT_HUB_CULL_EVERY [300]        s between the culler's checks
KIT_HUB_ACTIVITY_INTERVAL [300] s between activity reports (server -> hub, proxy -> hub)
KIT_HUB_MODE [auto]             KITLIB_MODE of the learners' kernels: replay, live, or auto
                                (live where `nvidia-smi -L` lists a GPU, else replay)
KIT_HUB_PYTHON [this python]    the interpreter every learner runs, readable by all users, with the
                                kit installed editable from the course checkout (e.g.
                                /opt/kit/bin/python, pip install -e /opt/course): the lessons copied
                                into each home are that checkout's lessons/
KIT_HUB_CGROUP [kithub]         parent cgroup of the learners' cgroups
KIT_HUB_SHARED_CACHE []         a read-only trace cache of the shipped recordings, built once with
                                `python -m kitlib cache --build DIR` (KITLIB_SHARED_CACHE of the kernels)
KIT_HUB_API_TOKEN []            when set, a service "class-admin" with this token may manage users
                                and servers through the REST API (scripts, tests)
KIT_HUB_CLASS_VIEW [0]          1: the instructor's live view of the class (deploy/hub/classview/):
                                learners' kernels send each judged answer to it, over loopback
KIT_HUB_CLASS_VIEW_PORT [8082]  its port (127.0.0.1 only; browsers reach it at /services/classview/)
KIT_HUB_CLASS_VIEW_KEEP_DAYS [30] days an attempt is kept in STATE_DIR/classview.sqlite
KIT_HUB_CLASS_VIEW_REFRESH_S [15] s between reloads of the instructor's page
KIT_HUB_INSTRUCTORS []          comma-separated user names put in the hub group "instructors" (who,
                                besides the admins, may open the class view's page)
CONFIGPROXY_AUTH_TOKEN          the proxy API's token (required with KIT_HUB_EXTERNAL_PROXY=1)

Learners are created by the instructor's script (deploy/hub/add_learners.sh: useradd with a home
of mode 0700 and a password, in KIT_HUB_GROUP), not by the hub: the hub's own user creation
(LocalAuthenticator.create_system_users) makes accounts without a password, with the system's
default home mode (0755 on many systems, so learners could read each other's files), and it would
run adduser for anyone allowed in. Here an account exists before the hub sees it, and the
instructor removes it (userdel -r) after the course.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

c = get_config()  # noqa: F821 (defined by JupyterHub when it loads this file)


def _env(name, default):
    return os.environ.get(name, "").strip() or default


STATE = Path(_env("KIT_HUB_STATE_DIR", "/srv/kithub"))
STATE.mkdir(parents=True, exist_ok=True)
STATE.chmod(0o700)        # the database (users, token hashes) is for root only, not for learners
PYTHON = _env("KIT_HUB_PYTHON", sys.executable)
CGROUP = _env("KIT_HUB_CGROUP", "kithub")
IDLE_TIMEOUT_S = int(_env("KIT_HUB_IDLE_TIMEOUT", "3600"))
CULL_EVERY_S = int(_env("KIT_HUB_CULL_EVERY", "300"))
ACTIVITY_S = int(_env("KIT_HUB_ACTIVITY_INTERVAL", "300"))

# ---- the proxy, the hub, the state kept across restarts ----------------------------------------
c.JupyterHub.bind_url = f"http://{_env('KIT_HUB_IP', '0.0.0.0')}:{int(_env('KIT_HUB_PORT', '8000'))}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{int(_env('KIT_HUB_HUB_PORT', '8081'))}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(_env('KIT_HUB_PROXY_API_PORT', '8001'))}"
c.ConfigurableHTTPProxy.should_start = _env("KIT_HUB_EXTERNAL_PROXY", "0") != "1"
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
# a hub restart (upgrade, config change) leaves the learners' servers and kernels running
c.JupyterHub.cleanup_servers = False
c.JupyterHub.last_activity_interval = ACTIVITY_S

# ---- who may log in ---------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "pam"           # the learners' system passwords
c.LocalAuthenticator.create_system_users = False   # accounts come from add_learners.sh (see top)
c.LocalAuthenticator.allowed_groups = {_env("KIT_HUB_GROUP", "kitlearners")}
c.Authenticator.allow_existing_users = True        # users the instructor adds in the admin page/API
c.Authenticator.admin_users = {u.strip() for u in _env("KIT_HUB_ADMINS", "").split(",") if u.strip()}

# ---- each learner's server: own user, own home, own limits --------------------------------------
_mem = _env("KIT_HUB_MEM_LIMIT", "2G")                    # bytes, or with K, M, G (powers of 1024)
c.Spawner.mem_limit = int(_mem) if _mem.isdigit() else _mem  # enforced by the cgroup below
c.Spawner.cpu_limit = float(_env("KIT_HUB_CPU_LIMIT", "1.0"))
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab/tree/lessons"
# A room arriving at once starts every server together: with 20 learners in 30 s on two cores
# (benchmarks/bench_class.py, 6 December) two servers took 106 s to answer and the hub gave up
# on them at 120 s. A slow start is better than a failed one: the learner sees the hub's
# progress page meanwhile.
c.Spawner.start_timeout = int(_env("KIT_HUB_START_TIMEOUT", "600"))
c.Spawner.http_timeout = int(_env("KIT_HUB_START_TIMEOUT", "600"))


def _kit_mode():
    mode = _env("KIT_HUB_MODE", "auto")
    if mode != "auto":
        return mode
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        if "GPU" in out:
            return "live"
    return "replay"


_THREADS = str(max(1, round(float(_env("KIT_HUB_CPU_LIMIT", "1.0")))))
c.Spawner.environment = {
    "KITLIB_MODE": _kit_mode(),
    "JUPYTERHUB_ACTIVITY_INTERVAL": str(ACTIVITY_S),
    # torch and BLAS start one thread per core of the machine, not per core of the learner's quota
    "OMP_NUM_THREADS": _THREADS,
    "MKL_NUM_THREADS": _THREADS,
}
# a trace cache of the shipped recordings built once (python -m kitlib cache --build DIR) and
# read-only: no learner's kernel parses a shipped recording again
if _env("KIT_HUB_SHARED_CACHE", ""):
    c.Spawner.environment["KITLIB_SHARED_CACHE"] = _env("KIT_HUB_SHARED_CACHE", "")
# Before the server starts, as the learner: copy the lessons into ~/lessons with the kit's own
# `python -m kitlib workspace` (a lesson already there is kept: it holds the learner's answers),
# then run the single-user server with the same interpreter. nbgitpuller would also merge the
# course's later edits into the learner's copies, but it needs the course in a git remote and an
# extra package; here the course is a checkout on this server and a lesson is never overwritten.
c.Spawner.cmd = [
    "/bin/sh", "-c",
    '"$0" -m kitlib workspace --dest "$HOME/lessons" '
    '|| echo "kit hub: lessons NOT copied into $HOME/lessons for $USER (see the line above)" >&2; '
    'exec "$0" -m jupyterhub.singleuser "$@"',
    PYTHON,
]


# ---- per-learner limits: one cgroup per learner (v1: memory + cpu controllers; v2: unified) -----
def _write(path, value):
    Path(path).write_text(str(value))


def _cgroup_dirs(name):
    """The learner's cgroup folders, as (kind, path) pairs; the first item says v1 or v2."""
    if Path("/sys/fs/cgroup/cgroup.controllers").is_file():             # v2 (unified) at the root
        return [("v2", Path("/sys/fs/cgroup") / CGROUP / name)]
    return [("memory", Path("/sys/fs/cgroup/memory") / CGROUP / name),
            ("cpu", Path("/sys/fs/cgroup/cpu") / CGROUP / name)]


def make_learner_cgroup(spawner):
    """pre_spawn_hook: create the learner's cgroup(s) with the memory and CPU limits; the
    spawner's preexec (below) moves the new server into them before it drops to the learner's
    user, so the server and every kernel it starts count against the learner's limits.
    Where cgroups are not writable (no root, a read-only /sys/fs/cgroup) the server starts
    without limits and the hub's log says so."""
    name = spawner.user.name
    mem = int(spawner.mem_limit or 0)
    quota_us = int(float(spawner.cpu_limit or 0) * 100_000)
    procs = []
    try:
        for kind, d in _cgroup_dirs(name):
            if kind == "v2":
                parent = d.parent
                parent.mkdir(exist_ok=True)
                _write(parent / "cgroup.subtree_control", "+memory +cpu")
                d.mkdir(exist_ok=True)
                _write(d / "memory.max", mem or "max")
                _write(d / "cpu.max", f"{quota_us or 'max'} 100000")
            else:
                d.mkdir(parents=True, exist_ok=True)
                if kind == "memory":
                    _write(d / "memory.limit_in_bytes", mem or -1)
                    _write(d / "memory.max_usage_in_bytes", 0)      # peak of this spawn only
                else:
                    _write(d / "cpu.cfs_period_us", 100_000)
                    _write(d / "cpu.cfs_quota_us", quota_us or -1)
            procs.append(str(d / "cgroup.procs"))
    except OSError as e:
        spawner.log.warning("kit hub: limits NOT enforced for %s: cannot set up cgroup %s (%s); "
                            "the server starts without memory or CPU limits", name, d, e)
        procs = []
    else:
        spawner.log.info("kit hub: %s limited to %d bytes of memory and %.2f CPU in %s",
                         name, mem, quota_us / 100_000, ", ".join(str(d) for _, d in _cgroup_dirs(name)))
    spawner.kit_cgroup_procs = procs


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose child joins the learner's cgroup(s) (as root, before setuid)."""

    def make_preexec_fn(self, name):
        drop_to_learner = super().make_preexec_fn(name)
        procs = list(getattr(self, "kit_cgroup_procs", []))

        def preexec():
            for p in procs:
                with open(p, "w") as f:
                    f.write(str(os.getpid()))
            drop_to_learner()
        return preexec


c.JupyterHub.spawner_class = ClassSpawner
c.Spawner.pre_spawn_hook = make_learner_cgroup

# ---- services: the idle culler (and, when a token is given, an admin API client) ---------------
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                f"--timeout={IDLE_TIMEOUT_S}", f"--cull-every={CULL_EVERY_S}"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
if _env("KIT_HUB_API_TOKEN", ""):
    c.JupyterHub.services.append({"name": "class-admin", "api_token": os.environ["KIT_HUB_API_TOKEN"]})
    c.JupyterHub.load_roles.append({
        "name": "class-admin",
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users", "access:servers",
                   "access:services"],
        "services": ["class-admin"],
    })

# ---- the instructor's live view of the class (docs/TEACHING_A_CLASS.md) ------------------------
if _env("KIT_HUB_CLASS_VIEW", "0") == "1":
    _cv_url = f"http://127.0.0.1:{int(_env('KIT_HUB_CLASS_VIEW_PORT', '8082'))}"
    c.JupyterHub.services.append({
        "name": "classview", "url": _cv_url, "display": True, "oauth_no_confirm": True,
        "command": [sys.executable, str(Path(__file__).resolve().parent / "classview" / "classview.py")],
        "environment": {"KIT_CLASSVIEW_DB": str(STATE / "classview.sqlite"),
                        "KIT_CLASSVIEW_KEEP_DAYS": _env("KIT_HUB_CLASS_VIEW_KEEP_DAYS", "30"),
                        "KIT_CLASSVIEW_REFRESH_S": _env("KIT_HUB_CLASS_VIEW_REFRESH_S", "15"),
                        "KIT_CLASSVIEW_INSTRUCTORS_GROUP": "instructors"},
    })
    # the service asks the hub whether someone is an admin or in the group "instructors"
    c.JupyterHub.load_roles.append({"name": "classview", "scopes": ["read:users", "read:groups"],
                                    "services": ["classview"]})
    # every user may use the service (each sees only their own record: the service checks that)
    c.JupyterHub.load_roles.append({"name": "user", "scopes": ["self", "access:services!service=classview"]})
    # ... and so may the token of their server, which its kernels inherit (JUPYTERHUB_API_TOKEN)
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server",
                                     "access:services!service=classview"]
    c.Spawner.environment["KITLIB_CLASS_VIEW_URL"] = f"{_cv_url}/services/classview/"
    _instructors = [u.strip() for u in _env("KIT_HUB_INSTRUCTORS", "").split(",") if u.strip()]
    if _instructors:
        c.JupyterHub.load_groups = {"instructors": {"users": _instructors}}
