"""Execute one notebook with nbclient in a process of its own (used by tests/conftest.py).

    python tests/support/run_notebook.py IN.ipynb OUT.ipynb [--timeout 300]

The kernel starts in the current directory; the executed notebook (outputs and widget
state, as ``NotebookClient.execute`` leaves them) is written to OUT. Run this way, a
lesson that stalls can be killed with its kernel and run again: on 1 December 2026 a lesson
run sat idle for minutes, three times in five runs of the whole suite (never in 39 runs of
the lessons alone), before going on.

So that the caller can tell a stall from a slow cell, one line goes to standard output
as the kernel becomes ready and as each cell starts and ends. Both this process and the
kernel print the stack of every thread to standard error on SIGUSR1 (``faulthandler``; this
process passes the signal on to the kernel, which runs in a session of its own), so that a
caller can see where a stalled run waits before it kills it. The kernel talks to
this process over Unix sockets (ZeroMQ's ``ipc`` transport) in a temporary folder of its own.
"""
import argparse
import faulthandler
import os
import shutil
import signal
import sys
import tempfile

# nbformat imports jsonschema, whose format checkers build 38 grammars at import when the
# optional rfc3987_syntax is installed (jupyter-events brings it): 1.5 s of this process's
# 2.4 s start, in every lesson run. Nothing here checks an IRI's syntax; without that
# package jsonschema leaves the "iri" format unchecked, as documented.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

#: Run by the kernel as it starts (IPKernelApp.exec_lines): its stacks on SIGUSR1.
KERNEL_DUMPS_ON_SIGUSR1 = "import faulthandler, signal; faulthandler.register(signal.SIGUSR1, all_threads=True)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    nb = nbformat.read(a.src, as_version=4)

    def say(text):
        print(text, flush=True)

    # Unix sockets in the current directory, not TCP ports picked in advance on 127.0.0.1:
    # no port another process can take between the pick and the kernel's bind.
    sockets = tempfile.mkdtemp(prefix="kernel-")
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "ipc"))

    def dump_stacks(signum, frame):
        faulthandler.dump_traceback(all_threads=True)
        kernel = getattr(km.provisioner, "process", None)    # the kernel runs in a session of its own
        if kernel is not None:
            os.kill(kernel.pid, signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, dump_stacks)
    client = NotebookClient(
        nb, km=km, timeout=a.timeout, kernel_name="python3", shutdown_kernel="immediate",
        resources={"metadata": {"path": os.getcwd()}},
        extra_arguments=[f"--IPKernelApp.exec_lines={KERNEL_DUMPS_ON_SIGUSR1!r}"],
        on_notebook_start=lambda **_: say("kernel ready"),
        on_cell_start=lambda cell, cell_index, **_: say(f"cell {cell_index} starts"),
        on_cell_executed=lambda cell, cell_index, **_: say(f"cell {cell_index} ends"))
    try:
        client.execute()
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    nbformat.write(nb, a.dst)
    say("written")


if __name__ == "__main__":
    main()
