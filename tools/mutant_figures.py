"""Does a surviving mutant change a figure on the shipped recordings? Printed, never asserted.

    mutmut run --max-children 1 "kitlib.analyses.steps.x_step_measures*"    # first: the survivors
    python tools/mutant_figures.py kitlib.analyses.steps.step_measures     # then: which of them matter

mutmut reports a mutant as "survived" when no selected test failed; that alone does not
say whether the edit would change anything a learner reads. This script calls the named
analysis on every recording the kit ships (each torch.profiler trace under
``data/reference``, the public NCCL ranks included, and each Nsight Systems export where the function takes a report),
once unmutated and once per surviving mutant of that function (mutmut's ``mutants/``
copy, the mutant switched on with ``MUTANT_UNDER_TEST`` as mutmut itself does), and
compares the outputs: values, columns, dtypes, index and ``attrs`` of every table, or the
error raised. A mutant listed under "changes a figure" needs a test; one under "same
figures" is equivalent on the shipped recordings (a boundary, tie or default that they
never reach) and is named as such in the README.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r'''
import hashlib, importlib, pickle, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
import pandas as pd
import kitlib
from kitlib.readers.nsys import load_nsys
mod_name, fn_name = sys.argv[1].rsplit(".", 1)
fn = getattr(importlib.import_module(mod_name), fn_name)
call = sys.argv[2]
import numpy as np
from kitlib import analyses
ref = Path("data/reference")
traces = set(ref.rglob("trace.json.gz")) | set((ref / "public-traces").glob("*.json.gz"))
if sys.argv[3] == "ranks":     # multi-rank analyses: each folder of rank traces, read with load_traces
    sources = [(str(p), lambda p=p: kitlib.load_traces(p))
               for p in (ref / "ranks_balanced", ref / "ranks_straggler", ref / "public-traces")]
else:
    sources = [(str(p), lambda p=p: kitlib.load_trace(p)) for p in sorted(traces)]
    sources += [(str(p), lambda p=p: load_nsys(p)) for p in sorted(ref.rglob("report.sqlite"))]

def digest(obj):
    if isinstance(obj, pd.DataFrame):
        return ("frame", list(map(str, obj.columns)), [str(t) for t in obj.dtypes], list(obj.index[:3]),
                len(obj), repr(obj.attrs), hashlib.sha256(pd.util.hash_pandas_object(
                    obj.map(repr), index=True).to_numpy().tobytes()).hexdigest())  # repr: None is not NaN
    if isinstance(obj, pd.Series):
        return digest(obj.to_frame())
    if isinstance(obj, dict):
        return ("dict", sorted((str(k), digest(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return ("seq", [digest(v) for v in obj])
    return ("value", repr(obj))

out = {}
for name, load in sources:
    try:
        src = load()
    except Exception as e:
        continue
    try:
        out[name] = digest(eval(call, {"fn": fn, "src": src, "kitlib": kitlib, "pd": pd, "np": np,
                                       "analyses": analyses, "importlib": importlib}))
    except Exception as e:
        out[name] = ("error", type(e).__name__, str(e)[:300])
sys.stdout.buffer.write(pickle.dumps(out))
'''


def _run(function: str, mutant: str, call: str = "fn(src)", mutants: Path = ROOT / "mutants",
         sources: str = "files") -> dict:
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "KITLIB_PROGRESS": "0", "KITLIB_TRACE_CACHE": "0",
           "PYTHONPATH": str(mutants)}
    r = subprocess.run([sys.executable, "-c", _CHILD, function, call, sources], cwd=mutants, env=env,
                       capture_output=True, timeout=900)
    if r.returncode != 0:
        return {"<crash>": r.stderr.decode(errors="replace")[-300:]}
    return pickle.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("function", help="dotted name, e.g. kitlib.analyses.steps.step_measures")
    ap.add_argument("--call", default="fn(src)",
                    help="how to call it on one recording `src` (a Trace or an NsysReport), e.g. "
                         "\"fn(analyses.steps.device_work(src), src.steps[['step', 'start_ns', 'end_ns']])\"")
    ap.add_argument("mutants", nargs="*", help="mutant names (default: the survivors `mutmut results` lists)")
    ap.add_argument("--ranks", action="store_true",
                    help="call it on each folder of rank traces instead (ranks_balanced, ranks_straggler, "
                         "the public NCCL pair; `src` is a RankTraces)")
    ap.add_argument("--mutants-dir", type=Path, default=ROOT / "mutants",
                    help="mutmut's mutants/ folder (default: the repository's; a copy lets the next "
                         "`mutmut run` start meanwhile)")
    a = ap.parse_intermixed_args()      # mutant names may follow the options
    if not a.mutants_dir.is_dir():
        sys.exit(f"no {a.mutants_dir} folder: run `mutmut run` first (see the README's mutation-testing section)")
    mod, fn = a.function.rsplit(".", 1)
    prefix = f"{mod}.x_{fn}__mutmut_"
    names = a.mutants or [line.split(":")[0].strip() for line in subprocess.run(
        ["mutmut", "results"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
        if line.strip().startswith(prefix) and line.strip().endswith("survived")]
    kind = "ranks" if a.ranks else "files"
    base = _run(a.function, "", a.call, a.mutants_dir, kind)
    errors = sum(1 for v in base.values() if v and v[0] == "error")
    print(f"{a.function}: {len(base)} shipped recordings ({errors} where the unmutated call raises), "
          f"{len(names)} surviving mutants")
    changed, same = [], []
    for n in names:
        got = _run(a.function, n, a.call, a.mutants_dir, kind)
        diff = sorted(k for k in set(base) | set(got) if base.get(k) != got.get(k))
        (changed if diff else same).append(n)
        print(f"  {n.rsplit('_', 1)[-1]:>4}  {'changes a figure: ' + ', '.join((Path(d).name if a.ranks else Path(d).parent.name) or d for d in diff) if diff else 'same figures'}",
              flush=True)
    print(f"changes a figure: {len(changed)}; same figures on every shipped recording: {len(same)}")


if __name__ == "__main__":
    main()
