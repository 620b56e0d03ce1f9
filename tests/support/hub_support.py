"""What the tests of the class hub share (tests/course/test_hub.py, tests/course/test_classview.py): the hub
process started with deploy/hub/jupyterhub_config.py (or a config that loads it), its REST
calls, free ports, and the record of the processes a test started (for a crashed run's cleanup)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

CONFIG = ROOT / "deploy" / "hub" / "jupyterhub_config.py"
PIDS_FILE = Path("/var/tmp/kithub-test-pids.json")     # the hubs and proxies the tests started


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def started(pid):
    """Note a hub or proxy process the test started, for the cleanup of a crashed run."""
    pids = json.loads(PIDS_FILE.read_text()) if PIDS_FILE.is_file() else []
    PIDS_FILE.write_text(json.dumps(pids + [pid]))


class Hub:
    """The hub process and the REST calls the test makes through the proxy."""

    def __init__(self, state, ports, token, env_extra, config=CONFIG):
        self.state, self.ports, self.token, self.env_extra = state, ports, token, env_extra
        self.config = config
        self.url = f"http://127.0.0.1:{ports['public']}"
        self.proc = None
        self.starts = 0

    def start(self, **settings):
        import requests
        self.starts += 1
        env = {**os.environ, **self.env_extra, **settings}
        log = open(self.state / f"hub-{self.starts}.log", "w")
        self.log_path = log.name
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(self.config)],
                                     cwd=self.state, env=env, stdout=log, stderr=subprocess.STDOUT)
        started(self.proc.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 90:
            assert self.proc.poll() is None, f"the hub exited ({self.proc.returncode}):\n{self.log()}"
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=5).status_code == 200:
                    return time.monotonic() - t0
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError(f"the hub did not answer in 90 s:\n{self.log()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log(self, tail=6000):
        return Path(self.log_path).read_text()[-tail:]

    def api(self, method, path, token=None, **kw):
        import requests
        return requests.request(method, f"{self.url}/hub/api{path}", timeout=30,
                                headers={"Authorization": f"token {token or self.token}"}, **kw)

    def server_state(self, name):
        r = self.api("GET", f"/users/{name}")
        assert r.status_code == 200, r.text
        return r.json()["servers"].get("")

    def wait_ready(self, name, limit_s=120):
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            s = self.server_state(name)
            if s and s.get("ready"):
                return time.monotonic() - t0
            time.sleep(0.5)
        raise AssertionError(f"{name}'s server not ready in {limit_s} s:\n{self.log()}")
