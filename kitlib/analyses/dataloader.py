"""Where a step's batch came from: the DataLoader's epochs, workers and rounds.

With ``num_workers = W``, worker ``k`` builds batches ``k, k + W, …`` of each epoch. The kit's
rule: **warm-up = the first round and the first batch of the second round**
(``batch_in_epoch <= W``), the first a worker begins only after finishing one.

Sources: docs/SOURCES.md#dataloader-rounds
"""
from __future__ import annotations

import pandas as pd

from ..errors import KitError


def batch_positions(first_batch: int, n_steps: int, batches_per_epoch: int, num_workers: int) -> pd.DataFrame:
    """Which batch each of ``n_steps`` steps consumed, which worker built it, in which round.
    ``first_batch``: batches handed out before the first step (0 for a fresh loader);
    ``batches_per_epoch``: ``len(loader)``; ``num_workers``: the loader's.

    Returns per step: ``step_index, batch`` (from the loader's creation), ``epoch,
    batch_in_epoch``, ``worker``, ``round``, ``loader_warmup``.

    Raises KitError unless ``batches_per_epoch`` and ``num_workers`` are positive.

    Examples
    --------
    >>> batch_positions(first_batch=0, n_steps=5, batches_per_epoch=4, num_workers=2)
       step_index  batch  epoch  batch_in_epoch  worker  round  loader_warmup
    0           0      0      0               0       0      0           True
    1           1      1      0               1       1      0           True
    2           2      2      0               2       0      1           True
    3           3      3      0               3       1      1          False
    4           4      4      1               0       0      0           True
    """
    if int(batches_per_epoch) < 1 or int(num_workers) < 1:
        raise KitError(f"batches_per_epoch and num_workers must be >= 1, not {batches_per_epoch}, {num_workers} "
                       "(with num_workers=0 the main process loads every batch: there are no rounds)")
    b = pd.RangeIndex(first_batch, first_batch + n_steps)
    out = pd.DataFrame({"step_index": range(n_steps), "batch": b})
    out["epoch"] = out["batch"] // batches_per_epoch
    out["batch_in_epoch"] = out["batch"] % batches_per_epoch
    out["worker"] = out["batch_in_epoch"] % num_workers
    out["round"] = out["batch_in_epoch"] // num_workers
    out["loader_warmup"] = out["batch_in_epoch"] <= num_workers
    return out


def split_warmup(series_ms, first_batch: int, batches_per_epoch: int, num_workers: int) -> dict:
    """A series of step times (ms, in order) split by :func:`batch_positions`' rule:
    ``{"warm-up": [ms, …], "steady": [ms, …]}`` (either may be empty).

    Examples
    --------
    >>> split_warmup([300.0, 60.0, 50.0, 51.0, 49.0], first_batch=0, batches_per_epoch=10, num_workers=2)
    {'warm-up': [300.0, 60.0, 50.0], 'steady': [51.0, 49.0]}
    """
    pos = batch_positions(first_batch, len(series_ms), batches_per_epoch, num_workers)
    vals = pd.Series(list(series_ms), dtype="float64")
    return {"warm-up": vals[pos["loader_warmup"].to_numpy()].tolist(),
            "steady": vals[~pos["loader_warmup"].to_numpy()].tolist()}
