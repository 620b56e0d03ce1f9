"""Where a step's batch came from: the DataLoader's epochs, workers and rounds.

``torch.utils.data.DataLoader`` with ``num_workers = W`` works like this (PyTorch
``torch/utils/data/dataloader.py``, ``_MultiProcessingDataLoaderIter``):

- each worker process builds **whole batches** (load, decode and augment every image
  of the batch, then collate);
- when an epoch's iterator starts, it hands ``W × prefetch_factor`` batch indices to
  the workers in turn (batch ``b`` to worker ``b % W``), and one more each time the
  main thread takes a batch, so worker ``k`` builds batches ``k, k + W, k + 2W, …``
  of the epoch, one after the other;
- with ``pin_memory=True`` a thread of the main process (``pt_data_pin``) copies each
  finished batch into page-locked memory before the main thread receives it;
- with ``persistent_workers=False`` the workers are started again every epoch.

So the batches of the workers' **first round** (``batch_in_epoch < W``) are built in
parallel while the workers start, and batch ``W`` is the first that a worker can only
begin after finishing its first: where a slow worker first shows. This module labels
each step of a series with that position, and splits a series into the loader's
warm-up and its steady part by that rule, the kit's own, stated here so that it can be
questioned: **warm-up = the first round and the first batch of the second round**
(``batch_in_epoch <= W``).
"""
from __future__ import annotations

import pandas as pd

from ..errors import KitError


def batch_positions(first_batch: int, n_steps: int, batches_per_epoch: int, num_workers: int) -> pd.DataFrame:
    """Which batch each step of a series consumed, which worker built it, in which round.

    Parameters
    ----------
    first_batch : int
        Batches the loader had handed out before the series' first step (0 for a fresh
        loader; 3 for ``step_ms_uninstrumented`` in the reference recordings, after 3
        warm-up steps).
    n_steps : int
    batches_per_epoch : int
        ``len(loader)`` (:func:`kitlib.analyses.coldstart.loader_epoch_length`).
    num_workers : int
        The loader's ``num_workers`` (from the capture's manifest).

    Returns
    -------
    DataFrame, one row per step
        ``step_index`` (0-based, in the series), ``batch`` (counted from the loader's
        creation), ``epoch``, ``batch_in_epoch``, ``worker`` (``batch_in_epoch % W``),
        ``round`` (``batch_in_epoch // W``: 0 for the batches built while the workers
        started), ``loader_warmup`` (``batch_in_epoch <= W``, the module's rule).

    Raises
    ------
    KitError
        ``batches_per_epoch`` or ``num_workers`` is not a positive integer.

    Examples
    --------
    >>> from kitlib.analyses.dataloader import batch_positions
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
    """A series of step times split into the loader's warm-up and steady steps.

    Parameters
    ----------
    series_ms : sequence of float
        Step wall times in ms, in order (e.g. ``step_ms_uninstrumented``).
    first_batch, batches_per_epoch, num_workers : int
        As in :func:`batch_positions`.

    Returns
    -------
    dict
        ``{"warm-up": [ms, …], "steady": [ms, …]}`` by :func:`batch_positions`'s
        ``loader_warmup`` rule; either list may be empty.

    Examples
    --------
    >>> from kitlib.analyses.dataloader import split_warmup
    >>> split_warmup([300.0, 60.0, 50.0, 51.0, 49.0], first_batch=0, batches_per_epoch=10, num_workers=2)
    {'warm-up': [300.0, 60.0, 50.0], 'steady': [51.0, 49.0]}
    """
    pos = batch_positions(first_batch, len(series_ms), batches_per_epoch, num_workers)
    vals = pd.Series(list(series_ms), dtype="float64")
    return {"warm-up": vals[pos["loader_warmup"].to_numpy()].tolist(),
            "steady": vals[~pos["loader_warmup"].to_numpy()].tolist()}
