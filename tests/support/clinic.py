"""The tests' own reading of the clinic's shipped CPU recordings (``data/clinic/cpu``), with
gzip, json and orjson alone, no kitlib: what tests/capture/test_clinic.py and lesson 13's answers
(tests/lessons/test_answers_l13.py) pin kitlib's figures to."""
from __future__ import annotations

import gzip
import statistics
from pathlib import Path

import orjson

from conftest import ROOT

SHIPPED = ROOT / "data" / "clinic" / "cpu"


def traces_of(bundle: Path) -> list:
    """The trace files of a bundle: one, or one per rank."""
    one = bundle / "trace.json.gz"
    return [one] if one.is_file() else sorted(bundle.glob("rank*/trace.json.gz"))


_RAW = {}


def raw_events(path: Path) -> list:
    """The complete ('X') events of a torch.profiler trace, read with gzip and orjson alone
    (json's floats, faster)."""
    if path not in _RAW:
        doc = orjson.loads(gzip.decompress(path.read_bytes()))
        _RAW[path] = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    return _RAW[path]


def _inside(ev, ranges) -> bool:
    return any(r["ts"] <= ev["ts"] and ev["ts"] + ev["dur"] <= r["ts"] + r["dur"] for r in ranges)


def raw_figures(trace: Path) -> dict:
    """The clinic's evidence figures of one trace, from the raw JSON: per active step
    (``ProfilerStep#N``) counts of operators in the labelled ranges, the data_load share,
    the gap between a step's start and its data_load (ms), the batch seen by the first
    convolution, and whether Python-stack events are there."""
    ev = raw_events(trace)
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    n = len(steps)
    ann = {k: [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == k]
           for k in ("data_load", "forward", "backward", "optimizer")}
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    conv = sorted((e for e in ops if e["name"] == "aten::convolution"), key=lambda e: e["ts"])
    gaps = [min(d["ts"] for d in ann["data_load"] if d["ts"] >= s["ts"]) - s["ts"] for s in steps]
    return {
        "steps": n,
        "data_load_share": sum(e["dur"] for e in ann["data_load"]) / sum(e["dur"] for e in steps),
        "ops_in_data_load": sum(_inside(e, ann["data_load"]) for e in ops) / n,
        "contiguous_in_forward": sum(e["name"] == "aten::contiguous" and _inside(e, ann["forward"])
                                     for e in ops) / n,
        "ops_in_optimizer": sum(_inside(e, ann["optimizer"]) for e in ops) / n,
        "isnan": sum(e["name"] == "aten::isnan" for e in ops) / n,
        "python_events": sum(e.get("cat") == "python_function" for e in ev),
        "batch": conv[0]["args"]["Input Dims"][0][0],
        "fwd_bwd_us_per_image": sum(e["dur"] for e in ann["forward"] + ann["backward"]) / n
        / conv[0]["args"]["Input Dims"][0][0],
        "step_start_gap_ms": statistics.median(gaps) / 1e3,
    }


def raw_memory_net(trace: Path) -> tuple:
    """The [memory] instants of a raw trace per ProfilerStep range, json alone: (their Bytes
    summed in each step, in order; records per step)."""
    doc = orjson.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = sorted((e for e in doc if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    mem = [e for e in doc if e.get("name") == "[memory]"]
    per = [[e for e in mem if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]] for s in steps]
    return [sum(e["args"]["Bytes"] for e in m) for m in per], sum(map(len, per)) / len(steps)


def raw_job_ops(trace: Path) -> dict:
    """Per name, the cpu_op events of a raw trace not inside a data_load range (the job's own
    work; the loader's bookkeeping inside data_load varies with timing), json alone."""
    ev = raw_events(trace)
    dl = [e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "data_load"]
    out = {}
    for e in ev:
        if e.get("cat") == "cpu_op" and not _inside(e, dl):
            out[e["name"]] = out.get(e["name"], 0) + 1
    return out
