"""How fast does kitlib read a trace? Ratios measured in one run, printed.

    python benchmarks/bench_trace.py [TRACE] [--repeat N]

Compares, on the same file (default: the reference profiler_5step trace, 73,507 events):
  1. a plain ``json.load`` of the (gzipped) file — the floor every reader pays;
  2. ``kitlib.load_trace`` — the parse plus the ops/launches/gpu/memory tables in integer ns;
  3. Holistic Trace Analysis' parser, when ``hta`` is installed (skipped otherwise).
Target (issue 2): kitlib at most 1.5x the plain JSON parse. Each measurement is the
best of N runs, interleaved so that machine noise hits all of them alike.
"""
import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kitlib.readers.trace import load_trace  # noqa: E402


def plain_json(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def hta_parse(path):
    """HTA's own parser with its default configuration (pip install holistictraceanalysis)."""
    from hta.common.trace_parser import ParserConfig, parse_trace_dataframe
    return parse_trace_dataframe(str(path), ParserConfig())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(ROOT / "data/reference/profiler_5step/trace.json.gz"))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    runs = {"json.load": plain_json, "kitlib.load_trace": load_trace}
    try:
        import hta  # noqa: F401
        runs["HTA parse_trace_dataframe"] = hta_parse
    except ImportError:
        print("(Holistic Trace Analysis not installed: skipped)")
    times = {k: [] for k in runs}
    for _ in range(a.repeat):
        for name, fn in runs.items():
            t = time.perf_counter()
            fn(a.trace)
            times[name].append(time.perf_counter() - t)
    base = min(times["json.load"])
    print(f"trace: {a.trace}  ({Path(a.trace).stat().st_size / 1e6:.1f} MB on disk), best of {a.repeat}")
    print(f"{'reader':30s} {'best (s)':>9s} {'median (s)':>11s} {'ratio to json.load':>19s}")
    for name, ts in times.items():
        print(f"{name:30s} {min(ts):9.3f} {statistics.median(ts):11.3f} {min(ts) / base:18.2f}x")
    r = min(times["kitlib.load_trace"]) / base
    print(f"target <= 1.50x: {'met' if r <= 1.5 else 'NOT met'} ({r:.2f}x)")


if __name__ == "__main__":
    main()
