"""Execute one notebook with nbclient in a process of its own (used by tests/conftest.py).

    python tests/run_notebook.py IN.ipynb OUT.ipynb [--timeout 300]

The kernel starts in the current directory; the executed notebook (outputs and widget
state, as ``NotebookClient.execute`` leaves them) is written to OUT. Run this way, a
lesson that stalls can be killed with its kernel and run again: twice on 1 December 2026
a lesson run inside the pytest process sat idle for about five minutes, kernel and
client both waiting on each other (the kernel had run no cell), before going on.
"""
import argparse
import os

import nbformat
from nbclient import NotebookClient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    nb = nbformat.read(a.src, as_version=4)
    NotebookClient(nb, timeout=a.timeout, kernel_name="python3", shutdown_kernel="immediate",
                   resources={"metadata": {"path": os.getcwd()}}).execute()
    nbformat.write(nb, a.dst)


if __name__ == "__main__":
    main()
