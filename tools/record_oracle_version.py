"""Record a tiny CPU workload with whatever torch runs this script, beside the profiler's own tables.

Made for issue 27 ("the Python-frame rule"): the same workload recorded with several torch
releases, each in its own virtual environment, so that the tests can check kitlib's rebuilt
``key_averages()`` against each release's own figures. It imports nothing but torch and the
standard library, so it runs in a bare venv::

    python -m venv /tmp/t29 && /tmp/t29/bin/pip install torch==2.9.1 numpy
    /tmp/t29/bin/python tools/record_oracle_version.py tests/data/oracle_versions

writes ``tests/data/oracle_versions/torch-2.9/<variant>/`` for each variant:

- ``stack_verbose``: ``with_stack=True`` and ``_ExperimentalConfig(verbose=True)`` (the
  settings of ``tests/data/oracle-cpu``);
- ``stack``: ``with_stack=True``, default experimental config;
- ``nostack``: ``with_stack=False``.

Each holds ``trace.json.gz`` (``export_chrome_trace``, gzipped), ``expected_by_name.json``
(``key_averages()``, the format of ``tests/data/oracle-cpu``), where the release has the
argument ``expected_by_name_with_python.json`` (``key_averages(include_python_functions=True)``),
``table.txt`` (``key_averages().table(sort_by="self_cpu_time_total")``) and ``events.json``: what
the profiler's own event list says about Python frames (how many of ``prof.events()`` are
Python frames, and the children of each ``forward`` range), the evidence of the rule.

Issue 41 added two workloads, recorded when named after the folder::

    /tmp/t213/bin/python tools/record_oracle_version.py tests/data/oracle_versions lstm_loader
    /tmp/t251/bin/python tools/record_oracle_version.py tests/data/oracle_versions convnet

Each goes to ``torch-X.Y/<workload>/`` with ``stack_verbose``'s settings and also holds
``expected_by_input_shape.json`` (``key_averages(group_by_input_shape=True)``) and
``expected_by_stack_5.json`` (``key_averages(group_by_stack_n=5)``); its settings are in
``torch-X.Y/recorded_<workload>.json``.
"""
from __future__ import annotations

import datetime
import gzip
import json
import os
import platform
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

try:
    from torch.profiler import _ExperimentalConfig
except ImportError:                                   # very old torch
    _ExperimentalConfig = None


def _first(e, *names):
    for n in names:
        v = getattr(e, n, None)
        if v is not None:
            return v
    return 0


def rows(averages):
    """``key_averages()`` rows in the format of ``tests/data/oracle-cpu/*/expected_by_*.json``."""
    out = []
    for e in averages:
        dt = getattr(e, "device_type", None)
        out.append({
            "key": e.key,
            "device_type": str(dt).split(".")[-1] if dt is not None else "CPU",
            "count": int(e.count),
            "input_shapes": str(e.input_shapes if e.input_shapes is not None else ""),
            "stack": [str(s) for s in list(e.stack or [])],
            "self_cpu_time_total": float(e.self_cpu_time_total),
            "cpu_time_total": float(e.cpu_time_total),
            "self_cpu_memory_usage": int(_first(e, "self_cpu_memory_usage")),
            "cpu_memory_usage": int(_first(e, "cpu_memory_usage")),
            "flops": int(getattr(e, "flops", 0) or 0),
            "self_device_time_total": float(_first(e, "self_device_time_total", "self_cuda_time_total")),
            "device_time_total": float(_first(e, "device_time_total", "cuda_time_total")),
        })
    return out


def workload():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))

    def step():
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer"):
            opt.step()
    return step


def lstm_loader_workload():
    """A small LSTM fed by a ``DataLoader`` (``num_workers=0``): the loader's Python frames
    (``__next__``, ``_next_data``, ``fetch``, collate) sit between the steps and the LSTM's
    operators, which is what issue 41 found torch 2.13's stack rows differ on."""
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(48, 6, 5), torch.randint(0, 3, (48,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, num_workers=0)
    lstm, head = torch.nn.LSTM(5, 8, batch_first=True), torch.nn.Linear(8, 3)
    opt = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.01)
    batches = iter(loader)

    def step():
        x, y = next(batches)
        with record_function("forward"):
            out, _ = lstm(x)
            loss = torch.nn.functional.cross_entropy(head(out[:, -1]), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer"):
            opt.step()
    return step


def convnet_workload():
    """A small ResNet-like net (convolutions, batch norms, one residual add, channels-last,
    as ``tests/data/oracle-cpu/resnet18``): the memory columns issue 41 found torch 2.5.1's
    rows differ on."""
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.bn_a = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.b, self.bn_b = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.bn_a(self.a(x)))
            return torch.relu(self.bn_b(self.b(y)) + x)

    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(3, stride=2, padding=1), Block(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(8, 10)).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(4, 3, 32, 32).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (4,))

    def step():
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer"):
            opt.step()
    return step


VARIANTS = {"stack_verbose": dict(with_stack=True, verbose=True),
            "stack": dict(with_stack=True, verbose=False),
            "nostack": dict(with_stack=False, verbose=False)}

#: issue 41's workloads, recorded with ``python tools/record_oracle_version.py ROOT lstm_loader convnet``:
#: the settings of ``stack_verbose`` (stacks in ``group_by_stack_n`` need ``verbose=True``),
#: and all three groupings written.
WORKLOADS = {"lstm_loader": lstm_loader_workload, "convnet": convnet_workload}


def record(out_dir, with_stack, verbose, steps=5, workload=workload, all_groupings=False):
    step = workload()
    kw = {}
    if verbose and _ExperimentalConfig is not None:
        kw["experimental_config"] = _ExperimentalConfig(verbose=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                 with_stack=with_stack, with_flops=True, schedule=schedule(wait=1, warmup=1, active=3),
                 **kw) as prof:
        for _ in range(steps):
            step()
            prof.step()
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f:
            doc = f.read()
    with gzip.GzipFile(os.path.join(out_dir, "trace.json.gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(doc)
    py_names = {e["name"] for e in json.loads(doc)["traceEvents"] if e.get("cat") == "python_function"}
    head = {"torch": torch.__version__, "grouping": "name"}
    ka = prof.key_averages()
    with open(os.path.join(out_dir, "expected_by_name.json"), "w") as f:
        json.dump({**head, "rows": rows(ka)}, f, indent=0)
    if all_groupings:
        for fname, grouping, kw in (("expected_by_input_shape.json", "input_shape", dict(group_by_input_shape=True)),
                                    ("expected_by_stack_5.json", "stack_5", dict(group_by_stack_n=5))):
            with open(os.path.join(out_dir, fname), "w") as f:
                json.dump({**head, "grouping": grouping, "rows": rows(prof.key_averages(**kw))}, f, indent=0)
    try:
        ka_py = prof.key_averages(include_python_functions=True)
    except TypeError:
        ka_py = None
    if ka_py is not None:
        with open(os.path.join(out_dir, "expected_by_name_with_python.json"), "w") as f:
            json.dump({**head, "grouping": "name, include_python_functions=True", "rows": rows(ka_py)}, f, indent=0)
    with open(os.path.join(out_dir, "table.txt"), "w") as f:
        f.write(ka.table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=60) + "\n")
    evs = prof.events()
    is_py = [bool(getattr(e, "is_python_function", False)) or e.name in py_names for e in evs]
    forwards = [e for e in evs if e.name == "forward"]
    with open(os.path.join(out_dir, "events.json"), "w") as f:
        json.dump({"torch": torch.__version__,
                   "n_events": len(evs),
                   "n_python_frames_in_events": int(sum(is_py)),
                   "n_python_function_events_in_trace": sum(1 for e in json.loads(doc)["traceEvents"]
                                                            if e.get("cat") == "python_function"),
                   "python_rows_in_key_averages": sorted({r.key for r in ka if r.key in py_names}),
                   "forward": [{"self_cpu_time_total": float(e.self_cpu_time_total),
                                "cpu_time_total": float(e.cpu_time_total),
                                "children": [c.name for c in e.cpu_children]} for e in forwards]},
                  f, indent=1)


def main(root, workloads=()):
    """Without ``workloads``: the tiny workload in the three ``VARIANTS``, ``recorded.json``.
    With names of ``WORKLOADS``: each in ``<name>/`` with ``stack_verbose``'s settings and all
    three groupings, its settings in ``recorded_<name>.json``."""
    v = torch.__version__.split("+")[0]
    major_minor = ".".join(v.split(".")[:2])
    base = os.path.join(root, f"torch-{major_minor}")
    if workloads:
        todo = {w: (os.path.join(base, w), dict(VARIANTS["stack_verbose"], workload=WORKLOADS[w], all_groupings=True),
                    f"recorded_{w}.json") for w in workloads}
    else:
        todo = {name: (os.path.join(base, name), kw, None) for name, kw in VARIANTS.items()}
    for name, (out, kw, _) in todo.items():
        record(out, **kw)
    settings = {name: {k: v for k, v in kw.items() if k in ("with_stack", "verbose")} for name, (_, kw, _) in todo.items()}
    for fname in {f or "recorded.json" for _, _, f in todo.values()}:
        names = [n for n, (_, _, f) in todo.items() if (f or "recorded.json") == fname]
        with open(os.path.join(base, fname), "w") as f:
            json.dump({"torch": torch.__version__, "python": platform.python_version(),
                       "machine": platform.machine(), "date": datetime.date.today().isoformat(),
                       "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                       "variants": {n: settings[n] for n in names}}, f, indent=1)
    print(base)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/oracle_versions", sys.argv[2:])
