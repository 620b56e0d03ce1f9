"""What the tests of the collectives share: the public NCCL pair read with json alone, the
collectives table rebuilt from raw JSON without kitlib (tests/analyses/test_distributed.py, lesson 12's
figures), and a two-rank NCCL pair worked out on paper (tests/analyses/test_collective_matching.py,
the bucket picture of tests/plots/test_plots_exposed.py)."""
from __future__ import annotations

import gzip
import json

from kitlib.analyses import collectives as coll
from kitlib.readers.ranks import load_traces

from conftest import REF
from support.events import event, gpu_event, launch_event

NCCL = REF / "public-traces"
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def raw_nccl_rank(r):
    """Rank ``r``'s raw trace JSON of the public NCCL pair, json alone."""
    return json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{r}.json.gz").read_bytes()))


def raw_collectives(folder):
    """collectives() rebuilt from each rank's raw JSON without kitlib: NCCL kernels (named
    after the innermost collective operator around their launch, on the launching thread,
    their size that operator's "Input Dims" as written), else the gloo:* operators (no
    shapes recorded: no size); k counts each name and size's calls in start order, and the
    call key is "name size#k" (or "name#k" without a size); the step is the ProfilerStep#N
    whose [start, end) holds the start; times in ns since the epoch."""
    import re
    from decimal import Decimal
    out = []
    for r, t in load_traces(folder, partial=folder == NCCL).traces.items():
        doc = json.loads(gzip.decompress(t.path.read_bytes()), parse_float=Decimal)
        base = int(doc.get("baseTimeNanoseconds") or 0)

        def ns(us):
            return int(Decimal(us) * 1000)
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        ops = [e for e in ev if e.get("cat") in ("cpu_op", "user_annotation")]
        steps = [(ns(e["ts"]) + base, ns(e["ts"]) + ns(e["dur"]) + base, int(e["name"].split("#")[1]))
                 for e in ops if e["name"].startswith("ProfilerStep#")]
        kernels = [e for e in ev if e.get("cat") == "kernel" and re.match(coll.COMM_KERNEL_PATTERN, e["name"])]
        rows = []
        if kernels:
            launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                      and "correlation" in e.get("args", {})}
            for k in kernels:
                name, size = k["name"].split("(", 1)[0].strip(), ""
                la = launch.get(k["args"]["correlation"])
                if la is not None:
                    around = [o for o in ops if o["tid"] == la["tid"] and ns(o["ts"]) <= ns(la["ts"]) <= ns(o["ts"]) + ns(o["dur"])]
                    if around:
                        inner = max(around, key=lambda o: (ns(o["ts"]), -ns(o["dur"])))
                        if re.search(coll.COMM_OP_PATTERN, inner["name"]):
                            name = inner["name"]
                            size = json.dumps(inner["args"]["Input Dims"]).replace(" ", "")
                rows.append((name, size, "device", k["args"]["stream"], ns(k["ts"]) + base, ns(k["dur"])))
        else:
            rows = [(o["name"], "", "host", o["tid"], ns(o["ts"]) + base, ns(o["dur"])) for o in ops
                    if o["name"].startswith("gloo:")]
        rows.sort(key=lambda x: x[4])
        seen = {}
        for name, size, where, tid, start, dur in rows:
            k = seen[name, size] = seen.get((name, size), -1) + 1
            step = next((n for a, b, n in steps if a <= start < b), -1)
            call = f"{name} {size}#{k}" if size else f"{name}#{k}"
            out.append((r, call, name, k, where, step, tid, start, start + dur, dur, size,
                        "name + size + order" if size else "name + order"))
    return out


def _doc(rank: int, calls: list, compute: list) -> dict:
    """A torch.profiler trace of one rank: ProfilerStep#1 over [0, 30000) µs; each call
    (seq, kernel start, kernel end) as record_param_comms (process group "0", Seq) ⊃
    nccl:all_reduce ⊃ cudaLaunchKernel on the host, 100 µs before its kernel, and an NCCL
    kernel on stream 20; each compute (start, end) as aten::mm ⊃ cudaLaunchKernel and a
    kernel on stream 7."""
    ev = [event("user_annotation", "ProfilerStep#1", 0, 30000, pid=100)]
    corr = 0
    for seq, a, b in calls:
        corr += 1
        h = a - 100
        ev += [event("cpu_op", "record_param_comms", h - 20, 60, pid=100, **{
                   "External id": corr, "Collective name": "allreduce", "Process Group Name": "0",
                   "Seq": seq, "In msg nelems": 4096, "Out msg nelems": 4096, "Group size": 2}),
               event("user_annotation", "nccl:all_reduce", h - 10, 40, pid=100, **{"External id": corr}),
               launch_event("cudaLaunchKernel", h, corr, 10, pid=100, **{"External id": corr}),
               gpu_event("kernel", NCCL_KERNEL, a, b - a, corr, stream=20, **{"External id": corr})]
    for a, b in compute:
        corr += 1
        ev += [event("cpu_op", "aten::mm", a - 80, 30, pid=100, **{"External id": corr}),
               launch_event("cudaLaunchKernel", a - 75, corr, 10, pid=100, **{"External id": corr}),
               gpu_event("kernel", "sm90_gemm_kernel", a, b - a, corr, stream=7, **{"External id": corr})]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "traceEvents": ev}


#: On paper (µs). Rank 0 computes [1000, 3000) and is first at call seq 7 ([1500, 5000));
#: rank 1 computes longer, [1000, 4000), and starts seq 7 at 4000: both end at 5000. Seq 8
#: ends 14 ms apart (not one call: the check refuses it); seq 6 is on rank 1 only (the
#: sampling dropped it on rank 0).
PAPER = {0: ([(7, 1500, 5000), (8, 6000, 7000)], [(1000, 3000)]),
         1: ([(6, 200, 600), (7, 4000, 5000), (8, 20000, 21000)], [(1000, 4000)])}


def paper_ranks(folder):
    """The pair on paper (:data:`PAPER`) written into ``folder`` as two gzipped rank traces
    and read back with ``load_traces``."""
    files = []
    for r, (calls, compute) in PAPER.items():
        f = folder / f"rank{r}.json.gz"
        f.write_bytes(gzip.compress(json.dumps(_doc(r, calls, compute)).encode()))
        files.append(f)
    return load_traces(files)
