"""How many learners does one machine hold? A whole class on the real hub. Printed, never asserted.

    sudo python benchmarks/bench_class.py [--learners 10 20 40] [--lessons 02 13] [--stagger-s 30]
                                          [--mem-limit 1536M] [--no-shared-cache] [--json FILE]

For each class size: the hub of ``deploy/hub/jupyterhub_config.py`` and configurable-http-proxy
on 127.0.0.1, that many learners (system users made by ``deploy/hub/add_learners.sh``), each
server started at a random moment within the first ``--stagger-s`` seconds, as learners arrive
in a room. Each learner then opens each lesson of ``--lessons`` in turn from their own
``~/lessons`` and runs its code cells in order over the kernel's websocket, as
``tests/course/test_hub.py`` does for one lesson, closing the kernel before the next lesson.

Printed per learner and lesson: seconds from the learner's arrival to the server being ready,
to the lesson's first output and to its last cell; the peak memory of the lesson's kernel
(its ``VmHWM``) and of all the learner's processes (the learner's memory cgroup,
``memory.max_usage_in_bytes``). For the machine: the median and the worst of each, the
errors, and the load. Issue 38's targets: 20 learners all finish with no error; a replay
kernel peaks at 400 MiB or less.

As the image and ``docs/TEACHING_A_CLASS.md`` deploy it, the kernels read a trace cache of the
shipped recordings built once, read-only (``KIT_HUB_SHARED_CACHE``; built here into the run's
temporary folder with ``python -m kitlib cache --build``, its time printed);
``--no-shared-cache`` makes each learner parse the recordings into a cache of their own.

Needs root, jupyterhub, jupyterhub-idle-culler and configurable-http-proxy (``.ci/run``
installs them). Uses its own users (``kitbench*``), group and cgroups, and removes them at
the end (also those a crashed run left). Nothing else should run on the machine meanwhile:
the figures are the machine's.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support import hub_support  # noqa: E402
from course import test_hub as th  # noqa: E402  (the class test's Learner, cleanup and cgroup helpers)

# its own names, so that it never touches what tests/course/test_hub.py makes
th.PREFIX, th.GROUP, th.CGROUP = "kitbench", "kitbench", "kitbench"
th.CG_MEM, th.CG_CPU, th.CG_V2 = (Path("/sys/fs/cgroup/memory/kitbench"), Path("/sys/fs/cgroup/cpu/kitbench"),
                                  Path("/sys/fs/cgroup/kitbench"))
th.MODES_FILE = Path("/var/tmp/kitbench-modes.json")
hub_support.PIDS_FILE = th.PIDS_FILE = Path("/var/tmp/kitbench-pids.json")


def _kernel_hwm(learner) -> int | None:
    """VmHWM (bytes) of the learner's running ipykernel process, None if none is found."""
    for pid in th._uid_pids(learner.pw.pw_uid):
        try:
            if b"ipykernel" in Path(f"/proc/{pid}/cmdline").read_bytes():
                status = Path(f"/proc/{pid}/status").read_text()
                return int(status.split("VmHWM:")[1].split()[0]) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return None


def _lesson_file(number: str) -> str:
    return next(p.name for p in sorted((ROOT / "lessons").glob(f"{number}_*.ipynb")))


def _run_learner(hub, learner, lessons, arrive_s, rows, errors):
    import requests
    time.sleep(arrive_s)
    t0 = time.monotonic()
    try:
        assert hub.api("POST", f"/users/{learner.name}/server").status_code in (201, 202)
        hub.wait_ready(learner.name, limit_s=600)
        ready = time.monotonic() - t0
        for number in lessons:
            name = _lesson_file(number)
            th.LESSON = name            # Learner.open_lesson opens th.LESSON
            nb = learner.get(f"/api/contents/lessons/{name}")
            assert nb.status_code == 200, nb.text
            cells = [c["source"] for c in nb.json()["content"]["cells"] if c["cell_type"] == "code"]
            start = time.monotonic()
            learner.open_lesson()
            first = None
            for src in cells:
                _, error, t = learner.execute(src, limit_s=900)
                assert error is None, f"lesson {number}: {error}"
                first = first or t
            kernel_peak = _kernel_hwm(learner)
            cg, _ = th._peak_memory(learner)
            rows.append({"learner": learner.name, "lesson": number, "ready_s": ready,
                         "first_output_s": (first or time.monotonic()) - t0, "last_cell_s": time.monotonic() - t0,
                         "lesson_s": time.monotonic() - start, "kernel_peak_mib": (kernel_peak or 0) / 2**20,
                         "learner_peak_mib": (cg or 0) / 2**20})
            learner.ws.close()
            requests.delete(f"{learner.base}/api/kernels/{learner.kernel_id}", timeout=60,
                            headers={"Authorization": f"token {learner.token}"})
    except BaseException as e:     # noqa: BLE001 (counted and printed, never raised)
        errors.append(f"{learner.name}: {type(e).__name__}: {str(e)[:300]}")


def build_shared_cache(tmp: Path) -> Path:
    """The read-only cache every learner's kernel reads (``python -m kitlib cache --build``)."""
    dest = tmp / "shared-cache"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "kitlib", "cache", "--build", str(dest)], check=True, timeout=1800,
                   env=dict(os.environ, PYTHONPATH=str(ROOT), KITLIB_PROGRESS="0"), stdout=subprocess.DEVNULL)
    for d in (tmp, *dest.rglob("*")):
        d.chmod(d.stat().st_mode | 0o555 if d.is_dir() else d.stat().st_mode | 0o444)
    print(f"shared trace cache built in {time.monotonic() - t0:.0f} s: {dest}", flush=True)
    return dest


def run_class(n: int, lessons, stagger_s: float, mem_limit: str, tmp: Path, shared_cache: Path | None = None) -> dict:
    """One class of ``n`` learners; returns the rows, the errors and the machine's figures."""
    th._clean_leftovers()
    state = tmp / f"hub{n}"
    state.mkdir(parents=True)
    ports = {k: hub_support.free_port() for k in ("public", "hub", "proxy_api")}
    proxy_token, admin_token = uuid.uuid4().hex, uuid.uuid4().hex
    env_extra = {
        "KIT_HUB_IP": "127.0.0.1", "KIT_HUB_PORT": str(ports["public"]), "KIT_HUB_HUB_PORT": str(ports["hub"]),
        "KIT_HUB_PROXY_API_PORT": str(ports["proxy_api"]), "KIT_HUB_EXTERNAL_PROXY": "1",
        "CONFIGPROXY_AUTH_TOKEN": proxy_token, "KIT_HUB_STATE_DIR": str(state), "KIT_HUB_GROUP": th.GROUP,
        "KIT_HUB_MEM_LIMIT": mem_limit, "KIT_HUB_CPU_LIMIT": "1.0", "KIT_HUB_MODE": "replay",
        "KIT_HUB_CGROUP": th.CGROUP, "KIT_HUB_API_TOKEN": admin_token, "KIT_HUB_PYTHON": sys.executable,
        "KIT_HUB_IDLE_TIMEOUT": "3600", "PYTHONPATH": str(ROOT),
    }
    if shared_cache:
        env_extra["KIT_HUB_SHARED_CACHE"] = str(shared_cache)
    proxy = subprocess.Popen(
        ["configurable-http-proxy", "--ip", "127.0.0.1", "--port", str(ports["public"]), "--api-ip", "127.0.0.1",
         "--api-port", str(ports["proxy_api"]), "--default-target", f"http://127.0.0.1:{ports['hub']}"],
        env=dict(os.environ, CONFIGPROXY_AUTH_TOKEN=proxy_token), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    hub_support.started(proxy.pid)
    hub = hub_support.Hub(state, ports, admin_token, env_extra)
    names = [f"{th.PREFIX}{i}" for i in range(1, n + 1)]
    rows, errors = [], []
    load_before = os.getloadavg()
    try:
        out = subprocess.run([str(th.ADD_LEARNERS), *names], capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, KIT_HUB_GROUP=th.GROUP))
        assert out.returncode == 0, out.stderr
        th._open_for_learners([sys.executable, ROOT])
        hub.start()
        assert hub.api("POST", "/users", json={"usernames": names}).status_code == 201
        learners = []
        for name in names:
            r = hub.api("POST", f"/users/{name}/tokens", json={"scopes": [f"access:servers!user={name}"],
                                                                "note": "bench_class", "expires_in": 7200})
            learners.append(th.Learner(hub, name, r.json()["token"]))
        rnd = random.Random(n)
        t0 = time.monotonic()
        threads = [threading.Thread(target=_run_learner, args=(hub, l, lessons, rnd.uniform(0, stagger_s), rows, errors))
                   for l in learners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=3600)
        wall = time.monotonic() - t0
    finally:
        hub.stop()
        proxy.terminate()
        th._clean_leftovers()
    return {"learners": n, "lessons": list(lessons), "rows": rows, "errors": errors, "wall_s": wall,
            "load_before": load_before, "load_after": os.getloadavg(), "cpus": os.cpu_count(),
            "mem_limit": mem_limit, "shared_cache": bool(shared_cache)}


def _summary(result: dict) -> str:
    rows, lines = result["rows"], []
    lines.append(f"== {result['learners']} learners, lessons {' '.join(result['lessons'])}: {result['wall_s']:.0f} s "
                 f"in all, {'shared trace cache' if result.get('shared_cache') else 'no shared cache'}, "
                 f"{len(result['errors'])} errors, load {result['load_before'][0]:.1f} -> "
                 f"{result['load_after'][0]:.1f} on {result['cpus']} CPUs")
    for r in sorted(rows, key=lambda r: (r["lesson"], r["learner"])):
        lines.append(f"  {r['learner']:<12} lesson {r['lesson']}: ready {r['ready_s']:6.1f} s, first output "
                     f"{r['first_output_s']:6.1f} s, last cell {r['last_cell_s']:7.1f} s; kernel peak "
                     f"{r['kernel_peak_mib']:4.0f} MiB, learner peak {r['learner_peak_mib']:4.0f} MiB")
    for lesson in result["lessons"]:
        mine = [r for r in rows if r["lesson"] == lesson]
        if not mine:
            continue
        for key in ("first_output_s", "last_cell_s", "kernel_peak_mib", "learner_peak_mib"):
            xs = [r[key] for r in mine]
            lines.append(f"  lesson {lesson} {key}: median {statistics.median(xs):.1f}, worst {max(xs):.1f} "
                         f"({len(xs)} of {result['learners']} learners finished)")
    lines += [f"  error: {e}" for e in result["errors"]]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--lessons", nargs="+", default=["02", "13"])
    ap.add_argument("--stagger-s", type=float, default=30.0)
    ap.add_argument("--mem-limit", default="1536M", help="each learner's memory limit (KIT_HUB_MEM_LIMIT)")
    ap.add_argument("--no-shared-cache", action="store_true",
                    help="each learner parses the recordings (no KIT_HUB_SHARED_CACHE)")
    ap.add_argument("--json", help="also write every figure to this file")
    args = ap.parse_args()
    why = th._missing()
    if why:
        sys.exit("bench_class: " + "; ".join(why))
    import tempfile
    results = []
    with tempfile.TemporaryDirectory(prefix="kitbench-") as tmp:
        shared = None if args.no_shared_cache else build_shared_cache(Path(tmp))
        for n in args.learners:
            results.append(run_class(n, args.lessons, args.stagger_s, args.mem_limit, Path(tmp), shared))
            print(_summary(results[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
