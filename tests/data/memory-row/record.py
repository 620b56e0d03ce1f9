"""Record tests/data/memory-row: a CPU workload whose tensors are freed by Python
between operators, so some allocator records fall inside no event (the profiler's
"[memory]" row). Run from the folder to write: python record.py"""
import json
import platform

import torch
from torch.profiler import ProfilerActivity, profile

from kitlib.capture.recipes import key_average_rows


def main():
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_flops=True) as prof:
        x = torch.ones(1000, 1000)
        y = x * 2
        del x                       # freed by Python between operators: a record inside no event
        z = torch.relu(y)
        del y
        w = z.sum()
        del z, w
    prof.export_chrome_trace("trace.json")
    for grouping, ka in (("name", prof.key_averages()), ("input_shape", prof.key_averages(group_by_input_shape=True))):
        with open(f"expected_by_{grouping}.json", "w") as f:
            json.dump({"torch": torch.__version__, "python": platform.python_version(), "grouping": grouping,
                       "rows": key_average_rows(ka)}, f, indent=1)


if __name__ == "__main__":      # pytest's --doctest-modules imports it: record only when run
    main()
