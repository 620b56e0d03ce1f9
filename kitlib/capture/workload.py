"""The workload the course profiles: ResNet-50 training on 101 food-like classes.

Everything the lessons measure is this one training step, built the way the
reference recordings in ``data/reference/`` were made (see
``data/reference/PROVENANCE.md`` and ``how_captured/capture.py``):

- model: torchvision ``resnet50(weights=None, num_classes=101)``, model and input
  in ``torch.channels_last``, fp32 parameters;
- optimiser and loss: SGD (lr 0.1, momentum 0.9, weight decay 1e-4), cross-entropy;
- data: Food-101 through ``torchvision.datasets.Food101(root, download=False)`` when
  the learner has it (``data_root`` or the environment variable ``KITLIB_FOOD101``),
  otherwise a synthetic 101-class JPEG ``ImageFolder`` cut from the sample
  photographs that ship inside scikit-image (generated once into a cache folder);
- transform: ``RandomResizedCrop(image_size)``, ``RandomHorizontalFlip``,
  ``ToTensor``, ``Normalize`` (ImageNet mean and standard deviation);
- one :func:`train_step` whose phases carry the same labels for both tools:
  ``torch.profiler.record_function`` ranges (seen by torch.profiler) and NVTX
  ranges (seen by Nsight Systems): ``data_load``, ``h2d``, ``forward``,
  ``backward``, ``optimizer``.

Which work ``data_load`` covers is an explicit option
(:attr:`WorkloadConfig.data_load_covers_h2d`), because the reference recordings
disagree exactly there: in the torch.profiler recordings ``data_load`` is
``next(batches)`` only and the copy submission has its own ``h2d`` range; in the
Nsight Systems recording ``nsys_8step`` ``data_load`` also holds the
``.to(device, non_blocking=True)`` calls and there is no ``h2d`` range.

Nothing here downloads anything unless the learner calls
:func:`download_food101`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import KitError, KitFileError
from ..paths import cache_dir
from ..phases import LABELS as PHASE_LABELS
from ..settings import value as setting
from ..units import ns_to_ms

#: The phase labels of :func:`train_step`, in order (defined in :mod:`kitlib.phases`).
#: Identical for ``record_function`` (torch.profiler) and NVTX (Nsight Systems).
LABELS = PHASE_LABELS

#: Classes of the model's head (Food-101 has 101).
NUM_CLASSES = 101

#: Images in the synthetic dataset by default: 14 batches of 128, as in the
#: reference recordings (``data/reference/PROVENANCE.md``).
DEFAULT_SYNTHETIC_IMAGES = 1792

#: scikit-image sample photographs the synthetic dataset is cut from, in the order
#: the reference recording used them (its list also named ``motorcycle_left``,
#: which ``skimage.data`` does not have, so the reference used these nine).
SYNTHETIC_SOURCES = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
                     "immunohistochemistry", "retina", "cat", "colorwheel")

#: The models :attr:`WorkloadConfig.model` can name, with the manifest's description.
MODELS = {"resnet50": f"torchvision resnet50(weights=None, num_classes={NUM_CLASSES})",
          "small_cnn": f"small CNN: Conv2d(3,16,3,stride 2)-BatchNorm-ReLU, Conv2d(16,32,3,stride 2)-"
                       f"BatchNorm-ReLU, global average pool, Linear(32,{NUM_CLASSES})",
          "deep_cnn": f"deep narrow CNN: Conv2d(3,16,3,stride 4)-BatchNorm-ReLU, then 24 x [Conv2d(16,16,3,"
                      f"padding 1)-BatchNorm-ReLU], global average pool, Linear(16,{NUM_CLASSES}): 102 small "
                      f"parameter tensors"}

#: Blocks of ``deep_cnn`` after its first convolution (see :data:`MODELS`).
DEEP_CNN_BLOCKS = 24

#: ImageNet channel mean and standard deviation used by ``Normalize``.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_SYNTHETIC_VERSION = 1   # bump when the generator's output changes
_COMPLETE = ".complete.json"


# --------------------------------------------------------------------------- config
def _default_workers() -> int:
    return min(8, os.cpu_count() or 1)


@dataclass
class WorkloadConfig:
    """Every setting of the training workload, stored in each capture's manifest.

    Parameters
    ----------
    batch_size : int
        Images per step (the reference: 128).
    steps : int or None
        Steps to record: the profiler schedule's ``active`` steps, or the timed steps
        of the ``timing`` recipe. ``None`` lets the recipe decide
        (see :data:`kitlib.capture.recipes.RECIPES`).
    device : str
        ``"auto"`` (a CUDA GPU when ``torch.cuda.is_available()``, else the CPU),
        ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
    num_workers : int
        DataLoader worker processes (0 = load in the training process). Default
        ``min(8, os.cpu_count())``; the reference used 8.
    pin_memory : bool or None
        DataLoader ``pin_memory``; ``None`` = on when the device is a GPU.
    persistent_workers : bool
        Keep the workers alive between epochs. The reference used ``False``, so every
        epoch (14 batches of 128) restarts them. Needs ``num_workers > 0``.
    prefetch_factor : int or None
        Batches each worker loads ahead; ``None`` = PyTorch's default (2). Needs
        ``num_workers > 0``.
    shuffle, drop_last : bool
        DataLoader options (both ``True`` in the reference).
    image_size : int
        Side of the square crop in pixels (``RandomResizedCrop(image_size)``; 224 in
        the reference; smaller makes a CPU run quick).
    data_root : str or None
        Folder holding ``food-101/`` (what ``torchvision.datasets.Food101(root)``
        expects), or the ``food-101`` folder itself. ``None``: the environment
        variable ``KITLIB_FOOD101``; if that is unset too, the synthetic dataset.
    synthetic_images : int
        Images in the synthetic dataset (at least 101, one per class).
    cache_dir : str or None
        Where the synthetic dataset is generated; ``None`` = :func:`cache_dir`.
    data_load_covers_h2d : bool
        ``False`` (as in the reference torch.profiler recordings): ``data_load`` is
        ``next(batches)`` only and the host-to-device copy submission is its own
        ``h2d`` range. ``True`` (as in the reference ``nsys_8step``): ``data_load``
        also covers ``.to(device, non_blocking=True)`` and there is no ``h2d`` range.
    channels_last : bool
        Model and input in ``torch.channels_last`` (the reference: ``True``).
    lr, momentum, weight_decay : float
        SGD settings (0.1, 0.9, 1e-4 in the reference).
    seed : int
        Seeds the model's initial weights (``torch.manual_seed``) and the synthetic
        dataset's crops.
    model : str
        ``"resnet50"`` (the course's workload) or ``"small_cnn"`` (:data:`MODELS`: two
        convolutions and a linear head, for quick CPU runs such as the test suite's
        two-rank recording; same data, labels and optimiser).
    straggler_rank : int or None
        Under ``torchrun``: the rank that sleeps :attr:`straggler_ms` at the start of
        every step, inside a ``straggler_delay`` range (``record_function`` and NVTX),
        so that the others wait for it in the gradient all-reduce. ``None``: no
        straggler. Ignored in a single process.
    straggler_ms : float
        The injected delay per step, in ms (``time.sleep``).
    straggler_label : bool
        ``True``: the delay sits in a ``straggler_delay`` range; ``False``: it is an
        unlabelled gap at the start of the step (the clinic's form, where the learner
        must find it, :mod:`kitlib.capture.clinic`).
    synthetic_px : int
        Width in pixels of the synthetic dataset's stored JPEGs (heights 3/4 to 1 of it):
        512 as in the reference; smaller images decode faster, so the loader keeps up
        with a small model on a CPU.
    pre_resize_px : int or None
        Also ``Resize(pre_resize_px)`` before the crop (an expensive transform when
        large: every image is upscaled first). ``None``: no such step (the reference).
    input_channels_last : bool or None
        Convert the input batch to ``channels_last`` on the device; ``None`` = as
        :attr:`channels_last`. ``False`` with a ``channels_last`` model feeds it
        channels-first batches, which each convolution converts.
    contiguous_blocks : bool
        Every block of the model ends with ``x.contiguous()`` (each ``Conv-BN-ReLU`` of
        ``deep_cnn``, each bottleneck of ``resnet50``, each conv layer of ``small_cnn``),
        as a custom block written "to be safe before a view" may. ``contiguous()``
        means the channels-first layout, so on a ``channels_last`` model each block
        hands the next one a channels-first copy, and the next convolution copies it
        back (PyTorch's channels-last tutorial: "Performance Gains" and "Converting
        existing models" warn of such calls). ``False``: no such call (the reference).
    non_blocking : bool
        ``.to(device, non_blocking=...)`` for the batch (the reference: ``True``).
    foreach, fused : bool or None
        Passed to ``torch.optim.SGD(foreach=..., fused=...)``; ``None`` = PyTorch's
        default (foreach on CUDA tensors, a per-tensor loop on the CPU).
    sync_every_step : bool
        After ``optimizer.step()``, read the loss with ``loss.item()`` every step (a
        logging habit: on a GPU it waits for the step's kernels to finish).
    detect_anomaly : bool
        Run forward and backward under ``torch.autograd.set_detect_anomaly(True)`` (a
        debugging switch left on: every backward node's outputs are checked for NaN,
        ``aten::isnan``/``aten::any``/``aten::item``, PyTorch docs "Anomaly detection").
    keep_loss_tensor : bool
        Add every step's loss to a running total kept as a tensor (``total += loss``
        instead of ``total += loss.item()``, :meth:`Workload.step`): the total's autograd
        history keeps every step's graph alive, so the process's memory grows step after
        step (PyTorch FAQ, "My model reports cuda runtime error(2): out of memory":
        "Don't accumulate history across your training loop").
    """

    batch_size: int = 128
    steps: int | None = None
    device: str = "auto"
    num_workers: int = field(default_factory=_default_workers)
    pin_memory: bool | None = None
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    shuffle: bool = True
    drop_last: bool = True
    image_size: int = 224
    data_root: str | None = None
    synthetic_images: int = DEFAULT_SYNTHETIC_IMAGES
    cache_dir: str | None = None
    data_load_covers_h2d: bool = False
    channels_last: bool = True
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    seed: int = 0
    model: str = "resnet50"
    straggler_rank: int | None = None
    straggler_ms: float = 0.0
    straggler_label: bool = True
    synthetic_px: int = 512
    pre_resize_px: int | None = None
    input_channels_last: bool | None = None
    contiguous_blocks: bool = False
    non_blocking: bool = True
    foreach: bool | None = None
    fused: bool | None = None
    sync_every_step: bool = False
    detect_anomaly: bool = False
    keep_loss_tensor: bool = False

    @classmethod
    def for_device(cls, device: str = "auto", **overrides) -> "WorkloadConfig":
        """Defaults that suit the device: the reference workload on a GPU, a small
        one that finishes in about a minute on a CPU.

        Parameters
        ----------
        device : str
            As :attr:`device`; resolved with :func:`resolve_device`.
        **overrides
            Any field of :class:`WorkloadConfig`; ``None`` values are ignored, so
            unset command-line options can be passed straight through.

        Returns
        -------
        WorkloadConfig
            On a GPU: batch 128, 224 px, 1,792 synthetic images, ``min(8, CPUs)``
            workers (the reference settings). On the CPU: batch 8, 112 px, 3 active
            steps, 202 synthetic images, ``min(2, CPUs)`` workers.

        Raises
        ------
        KitError
            ``device`` asks for a GPU that is not there (see :func:`resolve_device`).
        """
        dev = resolve_device(device)
        if dev.type == "cuda":
            base = dict(batch_size=128, image_size=224, synthetic_images=DEFAULT_SYNTHETIC_IMAGES,
                        num_workers=_default_workers())
        else:
            base = dict(batch_size=8, image_size=112, steps=3, synthetic_images=2 * NUM_CLASSES,
                        num_workers=min(2, os.cpu_count() or 1))
        base.update({k: v for k, v in overrides.items() if v is not None})
        cfg = cls(device=device, **base)
        cfg.validate()
        return cfg

    def batches_per_epoch(self) -> int:
        """Batches in one loader epoch (``len(loader)``) for this configuration.

        Food-101's 75,750 training images (750 per class, torchvision ``Food101``)
        when :func:`find_food101` finds the dataset, else ``synthetic_images``;
        divided by ``batch_size``, rounded down with ``drop_last``, else up.
        """
        n = 75_750 if find_food101(self.data_root) is not None else int(self.synthetic_images)
        b = int(self.batch_size)
        return n // b if self.drop_last else -(-n // b)

    def validate(self) -> "WorkloadConfig":
        """Check the settings before any work starts.

        Returns
        -------
        WorkloadConfig
            ``self``, so calls can be chained.

        Raises
        ------
        KitError
            A setting is out of range or two settings contradict each other (the
            DataLoader itself would raise a bare ``ValueError`` later).
        """
        def need(ok, msg):
            if not ok:
                raise KitError(f"bad workload setting: {msg}")
        need(isinstance(self.batch_size, int) and self.batch_size >= 1,
             f"batch_size must be a positive integer, not {self.batch_size!r}")
        need(self.steps is None or (isinstance(self.steps, int) and self.steps >= 1),
             f"steps must be a positive integer or None, not {self.steps!r}")
        need(isinstance(self.num_workers, int) and self.num_workers >= 0,
             f"num_workers must be 0 or more, not {self.num_workers!r}")
        need(isinstance(self.image_size, int) and self.image_size >= 32,
             f"image_size must be at least 32 pixels (ResNet-50 downsamples 32x), "
             f"not {self.image_size!r}")
        need(isinstance(self.synthetic_images, int) and self.synthetic_images >= NUM_CLASSES,
             f"synthetic_images must be at least {NUM_CLASSES} (one per class), "
             f"not {self.synthetic_images!r}")
        need(not self.persistent_workers or self.num_workers > 0,
             "persistent_workers=True needs num_workers > 0 (there are no workers to keep)")
        need(self.prefetch_factor is None or self.num_workers > 0,
             "prefetch_factor needs num_workers > 0 (it counts batches each worker loads ahead)")
        need(self.prefetch_factor is None or (isinstance(self.prefetch_factor, int)
                                              and self.prefetch_factor >= 1),
             f"prefetch_factor must be a positive integer, not {self.prefetch_factor!r}")
        need(self.model in MODELS, f"model must be one of {', '.join(MODELS)}, not {self.model!r}")
        need(self.straggler_rank is None or (isinstance(self.straggler_rank, int)
                                             and self.straggler_rank >= 0),
             f"straggler_rank must be a rank (0 or more) or None, not {self.straggler_rank!r}")
        need(isinstance(self.straggler_ms, (int, float)) and self.straggler_ms >= 0,
             f"straggler_ms must be 0 or more milliseconds, not {self.straggler_ms!r}")
        need(isinstance(self.synthetic_px, int) and self.synthetic_px >= 64,
             f"synthetic_px must be at least 64 pixels, not {self.synthetic_px!r}")
        need(self.pre_resize_px is None or (isinstance(self.pre_resize_px, int) and self.pre_resize_px >= 32),
             f"pre_resize_px must be None or at least 32 pixels, not {self.pre_resize_px!r}")
        need(not (self.foreach and self.fused),
             "foreach and fused cannot both be True (torch.optim.SGD refuses it)")
        need(str(self.device).split(":")[0] in ("auto", "cuda", "cpu"),
             f"device must be 'auto', 'cuda', 'cuda:N' or 'cpu', not {self.device!r}")
        return self

    def to_dict(self) -> dict:
        """The settings as plain JSON values, plus fixed descriptions of the model,
        optimiser, loss, transform and step labels, for a capture's manifest.

        Returns
        -------
        dict
            Every field, plus ``model``, ``optimizer``, ``loss``, ``transform``,
            ``labels`` (the phase labels this configuration emits) and
            ``data_load_covers`` (in words), the keys the reference manifests use.
        """
        d = dataclasses.asdict(self)
        d.update(
            model=MODELS[self.model],
            optimizer=f"SGD lr={self.lr:g} momentum={self.momentum:g} weight_decay={self.weight_decay:g}"
                      + (f" foreach={self.foreach}" if self.foreach is not None else "")
                      + (f" fused={self.fused}" if self.fused is not None else ""),
            loss="cross_entropy",
            transform=(f"Resize({self.pre_resize_px}), " if self.pre_resize_px else "")
                      + f"RandomResizedCrop({self.image_size}), RandomHorizontalFlip, ToTensor, "
                        f"Normalize(ImageNet)",
            labels=list(phase_labels(self.data_load_covers_h2d)),
            data_load_covers=("next(batches) and the .to(device, non_blocking=True) transfer submission"
                              if self.data_load_covers_h2d else "next(batches) only"),
        )
        return d


def phase_labels(data_load_covers_h2d: bool = False) -> tuple:
    """The phase labels :func:`train_step` emits.

    Parameters
    ----------
    data_load_covers_h2d : bool
        See :attr:`WorkloadConfig.data_load_covers_h2d`.

    Returns
    -------
    tuple of str
        :data:`LABELS`, without ``"h2d"`` when ``data_load`` covers the transfer.
    """
    return tuple(x for x in LABELS if not (data_load_covers_h2d and x == "h2d"))


# --------------------------------------------------------------------------- device
def resolve_device(device: str = "auto"):
    """Turn a device name into a ``torch.device``, checking that it exists.

    Parameters
    ----------
    device : str
        ``"auto"``, ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.

    Returns
    -------
    torch.device
        ``cuda`` (index 0 unless given) when asked for or, for ``"auto"``, when
        ``torch.cuda.is_available()``; ``cpu`` otherwise.

    Raises
    ------
    KitError
        A GPU was asked for but ``torch.cuda.is_available()`` is ``False`` (the
        message says whether this torch build has CUDA at all), the index is out of
        range, or the name is not one of the above.
    """
    import torch
    name = str(device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA support"
                   if torch.version.cuda is None else
                   f"this torch build supports CUDA {torch.version.cuda}, but no GPU or driver "
                   f"answers here")
            raise KitError(f"device {device!r} asked for, but torch.cuda.is_available() is False: "
                           f"{why} (torch {torch.__version__}). Use device 'cpu' or 'auto', or run "
                           f"the lessons on the recorded captures.")
        idx = 0
        if ":" in name:
            try:
                idx = int(name.split(":", 1)[1])
            except ValueError:
                raise KitError(f"device {device!r}: the part after 'cuda:' must be a GPU index") from None
        n = torch.cuda.device_count()
        if not 0 <= idx < n:
            raise KitError(f"device {device!r}: this machine has {n} GPU(s), numbered 0..{n - 1}")
        return torch.device("cuda", idx)
    raise KitError(f"unknown device {device!r}: use 'auto', 'cuda', 'cuda:N' or 'cpu'")


def synchronize(device) -> None:
    """Wait for all work queued on ``device`` (``torch.cuda.synchronize``); nothing on
    the CPU, where every operator has finished when it returns."""
    import torch
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- labels
@functools.lru_cache(maxsize=1)
def _nvtx_backend():
    """``(push, pop)`` for NVTX ranges: ``torch.cuda.nvtx`` when CUDA is available,
    else the ``nvtx`` package when installed, else no-ops. Without a GPU (and without
    Nsight Systems attached) NVTX calls record nothing anywhere."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # pragma: no cover - torch without the NVTX bindings
        pass
    try:
        import nvtx
        return nvtx.push_range, nvtx.pop_range
    except Exception:
        return (lambda name: None), (lambda: None)


@contextlib.contextmanager
def phase(name: str, annotate: bool = True):
    """Label a block for both tools: an NVTX range and a ``record_function`` range
    with the same name and the same boundaries.

    Parameters
    ----------
    name : str
        The label (one of :data:`LABELS` in :func:`train_step`).
    annotate : bool
        ``False`` makes this a no-op (no label for either tool).

    Notes
    -----
    ``torch.profiler.record_function`` adds a ``user_annotation`` event to a
    torch.profiler trace and costs next to nothing while no profiler runs (PyTorch
    docs, "torch.profiler"). NVTX ranges (``torch.cuda.nvtx.range_push`` /
    ``range_pop``) appear in Nsight Systems' NVTX rows; without a tool attached they
    are no-ops.
    """
    if not annotate:
        yield
        return
    from torch.profiler import record_function
    push, pop = _nvtx_backend()
    push(name)
    try:
        with record_function(name):
            yield
    finally:
        pop()


def train_step(model, optimizer, batches, device, *, data_load_covers_h2d: bool = False,
               channels_last: bool = True, annotate: bool = True, step_label: str | None = None,
               marks: list | None = None, non_blocking: bool = True, sync_every_step: bool = False,
               detect_anomaly: bool = False):
    """One training step, each phase labelled for torch.profiler and NVTX alike.

    Phases, in order (see :data:`LABELS`):

    - ``data_load``: ``x, y = next(batches)``; with ``data_load_covers_h2d`` also the
      transfer below, and no separate ``h2d`` range;
    - ``h2d``: ``x.to(device, non_blocking=True)`` (then ``channels_last`` on the
      device) and ``y.to(device, non_blocking=True)``: the copies are *submitted*
      here and run asynchronously from pinned memory;
    - ``forward``: model and cross-entropy loss;
    - ``backward``: ``optimizer.zero_grad(set_to_none=True)`` and ``loss.backward()``;
    - ``optimizer``: ``optimizer.step()``.

    Parameters
    ----------
    model : torch.nn.Module
    optimizer : torch.optim.Optimizer
    batches : iterator of (images, labels)
        Usually :func:`infinite_batches` over the DataLoader.
    device : torch.device or str
    data_load_covers_h2d : bool
        See :attr:`WorkloadConfig.data_load_covers_h2d`.
    channels_last : bool
        Convert the input to ``torch.channels_last`` on the device.
    annotate : bool
        ``False`` drops all labels (an unlabelled step).
    step_label : str, optional
        Also wrap the whole step in a range of this name for both tools (e.g.
        ``"torch_step#3"``). Not needed under a torch.profiler schedule, which marks
        each step itself as ``ProfilerStep#N`` when ``prof.step()`` is called; useful
        without a schedule and for Nsight Systems.
    marks : list, optional
        When given, one dict is appended: ``next_start_ns``, ``next_end_ns`` (the
        ``perf_counter_ns`` clock right around ``next(batches)``) and
        ``step_submitted_ns`` (after ``optimizer.step()`` returned, i.e. when all the
        step's work was submitted; the GPU may still be running it) — the format of
        the reference ``cold_start_8step/wallclock.json``.
    non_blocking : bool
        ``non_blocking`` of the batch's ``.to(device)`` calls (``False``: each copy
        waits for the GPU, and from pageable memory).
    sync_every_step : bool
        Read ``loss.item()`` after ``optimizer.step()``, unlabelled, as a logging line
        would (on a GPU the host then waits for the step's kernels).
    detect_anomaly : bool
        Forward and backward under ``torch.autograd.set_detect_anomaly(True)``.

    Returns
    -------
    torch.Tensor
        The loss (0-d, on the device). The step's GPU work may still be running:
        call :func:`synchronize` before reading a clock.

    Notes
    -----
    Phases and labels follow the reference recordings' step function
    (``data/reference/how_captured/capture.py``).
    """
    import torch
    with phase(step_label, annotate and bool(step_label)):
        with phase("data_load", annotate):
            t0 = time.perf_counter_ns()
            x, y = next(batches)
            t1 = time.perf_counter_ns()
            if data_load_covers_h2d:
                x, y = _to_device(x, y, device, channels_last, non_blocking)
        if not data_load_covers_h2d:
            with phase("h2d", annotate):
                x, y = _to_device(x, y, device, channels_last, non_blocking)
        anomaly = (torch.autograd.set_detect_anomaly(True) if detect_anomaly
                   else contextlib.nullcontext())
        with anomaly:
            with phase("forward", annotate):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with phase("backward", annotate):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
        with phase("optimizer", annotate):
            optimizer.step()
        if sync_every_step:
            loss.item()
    if marks is not None:
        marks.append({"next_start_ns": t0, "next_end_ns": t1, "step_submitted_ns": time.perf_counter_ns()})
    return loss


def _to_device(x, y, device, channels_last, non_blocking=True):
    import torch
    x = x.to(device, non_blocking=non_blocking)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y.to(device, non_blocking=non_blocking)


def infinite_batches(loader) -> Iterator:
    """Yield the loader's batches forever, starting a new epoch (a new iterator, so
    new workers unless ``persistent_workers``) whenever one ends.

    Raises
    ------
    KitError
        The loader yields no batch at all (e.g. fewer images than one batch with
        ``drop_last``).
    """
    epoch = 0
    while True:
        n = 0
        if hasattr(loader.sampler, "set_epoch"):   # DistributedSampler: a new shuffle each epoch
            loader.sampler.set_epoch(epoch)
        epoch += 1
        it = iter(loader)          # named, so that Workload.close(now=True) finds its workers
        for batch in it:
            n += 1
            yield batch
        if n == 0:
            raise KitError("the DataLoader yields no batch: the dataset holds fewer images than "
                           "one batch (with drop_last=True); use a smaller batch or more images")


# --------------------------------------------------------------------------- data
def transform(image_size: int = 224, pre_resize_px: int | None = None):
    """The training transform of the reference recordings.

    Parameters
    ----------
    image_size : int
        Output side in pixels.
    pre_resize_px : int, optional
        First ``Resize(pre_resize_px)`` (shorter side), an extra and costly step when
        large (:attr:`WorkloadConfig.pre_resize_px`); not in the reference.

    Returns
    -------
    torchvision.transforms.Compose
        ``RandomResizedCrop(image_size)``, ``RandomHorizontalFlip()``, ``ToTensor()``,
        ``Normalize(IMAGENET_MEAN, IMAGENET_STD)``: a float32 tensor ``[3, image_size,
        image_size]``.
    """
    from ..readers.bundle import import_torchvision
    T = import_torchvision().transforms
    first = [T.Resize(pre_resize_px)] if pre_resize_px else []
    return T.Compose([*first, T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def find_food101(data_root=None) -> Path | None:
    """Locate Food-101 as ``torchvision.datasets.Food101`` expects it.

    Parameters
    ----------
    data_root : str or os.PathLike, optional
        The folder holding ``food-101/`` or the ``food-101`` folder itself. When
        ``None``, the environment variable ``KITLIB_FOOD101``.

    Returns
    -------
    pathlib.Path or None
        The ``root`` to pass to ``Food101(root)`` (the folder that holds
        ``food-101/``), or ``None`` when neither ``data_root`` nor ``KITLIB_FOOD101``
        is set (then the synthetic dataset is used).

    Raises
    ------
    KitFileError
        A path was given but holds no Food-101 (``food-101/meta/train.json`` and
        ``food-101/images/`` are what torchvision's ``Food101`` reads).
    """
    given = data_root if data_root not in (None, "") else setting("KITLIB_FOOD101")
    if given is None:
        return None
    p = Path(given).expanduser()
    src = "data_root / --data-root" if data_root not in (None, "") else "KITLIB_FOOD101"
    if not p.exists():
        raise KitFileError(p, f"no such folder ({src}); it should hold food-101/ as "
                              f"torchvision.datasets.Food101 expects. Leave {src} unset to use "
                              f"the synthetic dataset.")
    for cand in (p, p.parent) if p.name == "food-101" else (p,):
        base = cand / "food-101"
        if (base / "meta" / "train.json").is_file() and (base / "images").is_dir():
            return cand
    raise KitFileError(p, f"no Food-101 here ({src}): torchvision.datasets.Food101 reads "
                          f"<root>/food-101/meta/train.json and <root>/food-101/images/<class>/<id>.jpg. "
                          f"Point {src} at the folder that holds food-101/, download it once (about "
                          f"5 GB) with python -c \"from kitlib.capture.workload import download_food101; "
                          f"download_food101('DIR')\" (in Python: download_food101(root)), or leave "
                          f"{src} unset to use the synthetic dataset.")


def _check_food101_images(root: Path) -> None:
    """Refuse a Food-101 folder whose ``meta/train.json`` names an image that is not
    there, naming it, before a DataLoader worker meets it mid-epoch.

    ``train.json`` maps each class to ``"class/id"`` entries, read by torchvision's
    ``Food101`` as ``images/class/id.jpg`` (torchvision ``datasets/food101.py``).

    Raises
    ------
    KitFileError
        ``train.json`` is not such a mapping, or names images that are missing (the
        first is named, with the count).
    """
    meta = root / "food-101" / "meta" / "train.json"
    try:
        listed = json.loads(meta.read_text())
    except (OSError, ValueError) as e:
        raise KitFileError(meta, f"cannot be read as Food-101 metadata ({e})") from None
    if not isinstance(listed, dict) or not all(isinstance(v, list) for v in listed.values()):
        raise KitFileError(meta, "is not Food-101 metadata: expected {class: [\"class/id\", ...]}")
    images = root / "food-101" / "images"
    missing = [rel for rels in listed.values() for rel in rels
               if not (images / f"{rel}.jpg").is_file()]
    if missing:
        raise KitFileError(images / f"{missing[0]}.jpg",
                           f"missing, although {meta} lists it"
                           + (f" ({len(missing):,} listed images are missing in all)"
                              if len(missing) > 1 else "")
                           + ": restore the image(s), or remove them from train.json")


def download_food101(root, progress: bool = True) -> Path:
    """Download and unpack Food-101 (about 5 GB) into ``root`` — only when you ask.

    Parameters
    ----------
    root : str or os.PathLike
        Folder that will hold ``food-101/``.
    progress : bool
        Unused by torchvision's downloader (it always shows its own bar); kept for
        symmetry.

    Returns
    -------
    pathlib.Path
        ``root``, ready for ``WorkloadConfig(data_root=root)``.

    Notes
    -----
    Calls ``torchvision.datasets.Food101(root, download=True)`` (torchvision docs).
    """
    from ..readers.bundle import import_torchvision
    torchvision = import_torchvision()
    root = Path(root).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    torchvision.datasets.Food101(str(root), split="train", download=True)
    return root


def _source_photos():
    """The photographs the synthetic dataset is cut from, as RGB PIL images, and
    where they come from."""
    from PIL import Image
    photos = []
    try:
        import skimage.data as sd
        for name in SYNTHETIC_SOURCES:
            try:
                a = getattr(sd, name)()
            except Exception:  # a sample missing from this scikit-image version
                continue
            if getattr(a, "ndim", 0) == 3 and a.shape[2] >= 3:
                photos.append(Image.fromarray(a[..., :3]))
        if photos:
            return photos, f"{len(photos)} scikit-image sample photographs (skimage.data)"
    except ImportError:
        pass
    try:
        import matplotlib.cbook as cbook
        with cbook.get_sample_data("grace_hopper.jpg") as f:
            photos.append(Image.open(f).convert("RGB"))
        return photos, "matplotlib's sample photograph grace_hopper.jpg"
    except Exception as e:
        raise KitError("cannot build the synthetic dataset: neither scikit-image's sample "
                       f"photographs nor matplotlib's grace_hopper.jpg could be read ({e})") from None


def synthetic_dataset(n_images: int = DEFAULT_SYNTHETIC_IMAGES, root=None, *, progress: bool = True,
                      seed: int = 0, width: int = 512) -> Path:
    """Generate (once) and return a 101-class JPEG ``ImageFolder`` for the workload.

    Each image is a random crop (a third to all of each side) of one of the sample
    photographs that ship inside scikit-image (:data:`SYNTHETIC_SOURCES`; matplotlib's
    ``grace_hopper.jpg`` when scikit-image is absent), resized to 512 px wide and
    384-512 px high, flipped left-right half the time and saved as JPEG quality 90
    into ``class_000`` ... ``class_100`` in turn. With the same seed and sources the
    sequence of crops is the reference recording's
    (``data/reference/how_captured/capture.py``).

    Parameters
    ----------
    n_images : int
        How many images (at least 101, one per class); 1,792 = 14 batches of 128 as
        in the reference.
    root : str or os.PathLike, optional
        The folder to generate into; by default
        ``cache_dir()/synthetic_food/<n_images>_images_v1``.
    progress : bool
        Show a tqdm progress bar (renders in Jupyter and in a terminal).
    seed : int
        Seeds the crops (``random.Random(seed)``).
    width : int
        Stored width in pixels (heights 3/4 to 1 of it); 512 as in the reference.
        Another width gets its own default folder (``..._<width>px_v1``).

    Returns
    -------
    pathlib.Path
        The dataset folder (pass it to ``torchvision.datasets.ImageFolder``).

    Raises
    ------
    KitError
        ``n_images`` is below 101, or no source photograph can be read.

    Notes
    -----
    Generation writes into a temporary sibling folder and renames it when done, so
    an interrupted run leaves no half dataset behind; a finished folder holds
    ``.complete.json`` and is reused as is.
    """
    from PIL import Image
    from tqdm.auto import tqdm
    if not isinstance(n_images, int) or n_images < NUM_CLASSES:
        raise KitError(f"synthetic dataset: n_images must be at least {NUM_CLASSES} "
                       f"(one per class), not {n_images!r}")
    if root is None:
        root = cache_dir() / "synthetic_food" / _synthetic_name(n_images, seed, width)
    root = Path(root)
    marker = root / _COMPLETE
    if marker.is_file():
        return root
    if root.exists() and any(root.iterdir()):
        raise KitFileError(root, "exists but is not a finished synthetic dataset (no "
                                 f"{_COMPLETE}); delete it or choose another folder")
    photos, origin = _source_photos()
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.parent / f".{root.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    try:
        for c in range(NUM_CLASSES):
            (tmp / f"class_{c:03d}").mkdir(parents=True)
        flip = getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT
        for i in tqdm(range(n_images), desc="synthetic dataset", unit="img", disable=not progress,
                      leave=False):
            im = rng.choice(photos)
            w, h = im.size
            cw, ch = rng.randint(w // 3, w), rng.randint(h // 3, h)
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            im2 = im.crop((x, y, x + cw, y + ch)).resize((512, rng.randint(384, 512)))
            if width != 512:
                im2 = im2.resize((width, max(1, im2.size[1] * width // 512)))
            if rng.random() < 0.5:
                im2 = im2.transpose(flip)
            im2.save(tmp / f"class_{i % NUM_CLASSES:03d}" / f"{i:05d}.jpg", quality=90)
        (tmp / _COMPLETE).write_text(json.dumps({
            "images": n_images, "classes": NUM_CLASSES, "seed": seed, "sources": origin,
            "format": f"JPEG quality 90, {width} x {width * 3 // 4}-{width} px", "version": _SYNTHETIC_VERSION,
            "seconds": round(time.perf_counter() - t0, 2)}, indent=1) + "\n")
        try:
            tmp.rename(root)   # an empty folder at root is replaced; a full one raises
        except OSError:
            if root.is_dir() and not any(root.iterdir()):
                root.rmdir()
                tmp.rename(root)
            elif (root / _COMPLETE).is_file():   # another process finished first
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def _synthetic_name(n_images: int, seed: int, width: int = 512) -> str:
    """The synthetic dataset's folder name under ``cache_dir()/synthetic_food``."""
    px = "" if width == 512 else f"_{width}px"
    return f"{n_images}_images_seed{seed}{px}_v{_SYNTHETIC_VERSION}"


def synthetic_info(root) -> dict:
    """What ``.complete.json`` of a synthetic dataset says (images, sources, seed, ...).

    Raises
    ------
    KitFileError
        The folder is not a finished synthetic dataset.
    """
    p = Path(root) / _COMPLETE
    if not p.is_file():
        raise KitFileError(root, "not a finished synthetic dataset (no .complete.json)")
    return json.loads(p.read_text())


def make_dataset(config: WorkloadConfig, *, progress: bool = True):
    """The training dataset for ``config``: Food-101 when available, else synthetic.

    Parameters
    ----------
    config : WorkloadConfig
    progress : bool
        Progress bar while generating the synthetic dataset.

    Returns
    -------
    dataset : torch.utils.data.Dataset
        ``torchvision.datasets.Food101(root, split="train", download=False)`` or
        ``torchvision.datasets.ImageFolder(synthetic_root)``, with :func:`transform`.
    description : dict
        ``dataset`` (one line for manifests), ``dataset_kind`` (``food101`` or
        ``synthetic``), ``dataset_root``, ``dataset_images``.

    Raises
    ------
    KitFileError
        ``data_root``/``KITLIB_FOOD101`` is set but holds no Food-101.
    """
    from ..readers.bundle import import_torchvision
    torchvision = import_torchvision()
    tf = transform(config.image_size, config.pre_resize_px)
    food = find_food101(config.data_root)
    if food is not None:
        _check_food101_images(food)
        try:
            ds = torchvision.datasets.Food101(str(food), split="train", transform=tf, download=False)
        except RuntimeError as e:  # torchvision: "Dataset not found. ..."
            raise KitFileError(food, f"torchvision.datasets.Food101 cannot read it: {e}") from None
        return ds, {"dataset": f"Food-101 train split ({len(ds):,} images, {len(ds.classes)} "
                               f"classes) via torchvision.datasets.Food101(download=False)",
                    "dataset_kind": "food101", "dataset_root": str(food), "dataset_images": len(ds)}
    root = synthetic_dataset(config.synthetic_images,
                             None if config.cache_dir is None else
                             Path(config.cache_dir) / "synthetic_food" /
                             _synthetic_name(config.synthetic_images, config.seed, config.synthetic_px),
                             progress=progress, seed=config.seed, width=config.synthetic_px)
    info = synthetic_info(root)
    ds = torchvision.datasets.ImageFolder(str(root), tf)
    return ds, {"dataset": f"synthetic: {len(ds):,} JPEGs ({info.get('format')}), "
                           f"{len(ds.classes)} classes, cut from {info.get('sources')}",
                "dataset_kind": "synthetic", "dataset_root": str(root), "dataset_images": len(ds)}


def make_loader(dataset, config: WorkloadConfig, device=None, sampler=None):
    """The DataLoader for ``config``.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
    config : WorkloadConfig
        ``batch_size``, ``shuffle``, ``num_workers``, ``pin_memory``,
        ``persistent_workers``, ``prefetch_factor``, ``drop_last``.
    device : torch.device, optional
        Decides ``pin_memory`` when the config leaves it ``None`` (on for a GPU).
    sampler : torch.utils.data.Sampler, optional
        E.g. a ``DistributedSampler`` (each rank its own shard); it then does the
        shuffling, so the loader's ``shuffle`` is off.

    Returns
    -------
    torch.utils.data.DataLoader

    Raises
    ------
    KitError
        The dataset holds fewer images than one batch while ``drop_last`` is set.
    """
    import torch
    config.validate()
    n_images = len(sampler) if sampler is not None else len(dataset)
    if config.drop_last and n_images < config.batch_size:
        raise KitError(f"the dataset (this rank's share) holds {n_images} images, fewer than one batch of "
                       f"{config.batch_size} (drop_last=True): use a smaller batch or more images")
    dev = torch.device(device) if device is not None else resolve_device(config.device)
    # Pinned memory only exists for an accelerator: on the CPU, torch ignores
    # pin_memory=True (with a warning), so kitlib neither asks nor records it.
    pin = (dev.type == "cuda") if config.pin_memory is None else bool(config.pin_memory)
    pin = pin and dev.type == "cuda"
    kw = dict(batch_size=config.batch_size, shuffle=config.shuffle and sampler is None,
              num_workers=config.num_workers, pin_memory=pin, drop_last=config.drop_last)
    if sampler is not None:
        kw["sampler"] = sampler
    if config.num_workers > 0:
        kw["persistent_workers"] = config.persistent_workers
        if config.prefetch_factor is not None:
            kw["prefetch_factor"] = config.prefetch_factor
    g = torch.Generator()
    g.manual_seed(config.seed)
    return torch.utils.data.DataLoader(dataset, generator=g, **kw)


def _end_blocks_with_contiguous(model, kind: str) -> None:
    """Make every block of ``model`` end with ``x.contiguous()`` (see
    :attr:`WorkloadConfig.contiguous_blocks`): after each ReLU that closes a
    ``Conv-BN-ReLU`` block of the CNNs, after each bottleneck of ResNet-50."""
    import torch

    class Contiguous(torch.nn.Module):
        """``x.contiguous()``: the default, channels-first layout."""

        def forward(self, x):
            return x.contiguous()

    if kind in ("small_cnn", "deep_cnn"):
        for i in reversed([i for i, m in enumerate(model) if isinstance(m, torch.nn.ReLU)]):
            model.insert(i + 1, Contiguous())
    else:
        for name in ("layer1", "layer2", "layer3", "layer4"):
            layer = getattr(model, name)
            for i in range(len(layer)):
                layer[i] = torch.nn.Sequential(layer[i], Contiguous())


def make_model(config: WorkloadConfig, device):
    """ResNet-50 and its optimiser, on ``device``.

    Returns
    -------
    model : torch.nn.Module
        torchvision ``resnet50(weights=None, num_classes=101)`` (or the small CNN of
        :data:`MODELS` when ``config.model == "small_cnn"``) in training mode,
        ``channels_last`` when asked; weights from ``torch.manual_seed(config.seed)``.
    optimizer : torch.optim.SGD
        ``lr``, ``momentum``, ``weight_decay`` (and ``foreach``/``fused`` when set) from
        the config.
    """
    import torch
    from ..readers.bundle import import_torchvision
    torchvision = import_torchvision()
    torch.manual_seed(config.seed)
    if config.model == "small_cnn":
        nn = torch.nn
        model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.Conv2d(16, 32, 3, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, NUM_CLASSES)).to(device)
    elif config.model == "deep_cnn":
        nn = torch.nn
        layers = [nn.Conv2d(3, 16, 3, stride=4), nn.BatchNorm2d(16), nn.ReLU()]
        for _ in range(DEEP_CNN_BLOCKS):
            layers += [nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()]
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(16, NUM_CLASSES)).to(device)
    else:
        model = torchvision.models.resnet50(weights=None, num_classes=NUM_CLASSES).to(device)
    if config.contiguous_blocks:
        _end_blocks_with_contiguous(model, config.model)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    kw = {k: getattr(config, k) for k in ("foreach", "fused") if getattr(config, k) is not None}
    opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                          weight_decay=config.weight_decay, **kw)
    return model, opt


# --------------------------------------------------------------------------- workload
#: Set to ask every running :class:`Workload` to stop before its next step (see
#: :meth:`Workload.step`); ``python -m kitlib profile`` sets it on Ctrl-C and SIGTERM
#: and clears it when a capture starts.
STOP = threading.Event()


@dataclass
class Workload:
    """A ready-to-run training workload (see :func:`build_workload`).

    Attributes
    ----------
    config : WorkloadConfig
    device : torch.device
    model, optimizer, loader
        As made by :func:`make_model` and :func:`make_loader`.
    data : dict
        The dataset's description (see :func:`make_dataset`).
    rank : int or None
        This process's rank under ``torchrun`` (the model is then wrapped in
        ``DistributedDataParallel``); ``None`` in a single process.
    """

    config: WorkloadConfig
    device: object
    model: object
    optimizer: object
    loader: object
    data: dict
    rank: int | None = None
    _batches: object = field(default=None, repr=False)
    _running_loss: object = field(default=None, repr=False)

    def step(self, annotate: bool = True, step_label: str | None = None, marks: list | None = None):
        """Run one :func:`train_step` (see there for ``step_label`` and ``marks``);
        returns the loss without waiting for the GPU. On the straggler rank
        (:attr:`WorkloadConfig.straggler_rank`) the step starts with a
        ``straggler_delay`` range that sleeps :attr:`WorkloadConfig.straggler_ms`.

        Raises ``KeyboardInterrupt`` before the step when :data:`STOP` is set (the
        command line sets it on Ctrl-C or SIGTERM), so that a stop request that
        Python swallowed (one landing inside a ``__del__``) still ends the run at the
        next step."""
        if STOP.is_set():
            raise KeyboardInterrupt("stop requested")
        if self._batches is None:
            self._batches = infinite_batches(self.loader)
        c = self.config
        if self.rank is not None and self.rank == c.straggler_rank and c.straggler_ms:
            with phase("straggler_delay", annotate and c.straggler_label):
                time.sleep(c.straggler_ms / 1e3)
        loss = train_step(self.model, self.optimizer, self._batches, self.device,
                          data_load_covers_h2d=c.data_load_covers_h2d,
                          channels_last=c.channels_last if c.input_channels_last is None else c.input_channels_last,
                          annotate=annotate, step_label=step_label, marks=marks,
                          non_blocking=c.non_blocking, sync_every_step=c.sync_every_step,
                          detect_anomaly=c.detect_anomaly)
        if c.keep_loss_tensor:           # total += loss: the total's history holds every step's graph
            self._running_loss = loss if self._running_loss is None else self._running_loss + loss
        return loss

    def sync(self) -> None:
        """Wait for the device (see :func:`synchronize`)."""
        synchronize(self.device)

    def describe(self) -> dict:
        """The manifest's ``workload`` entry: :meth:`WorkloadConfig.to_dict`, the
        resolved device, the dataset description and the ``pin_memory`` in use."""
        import torch
        d = self.config.to_dict()
        d.update(self.data)
        d["device_resolved"] = str(self.device)
        d["pin_memory"] = bool(self.loader.pin_memory)
        if self.config.pin_memory and not d["pin_memory"]:
            d["pin_memory_note"] = (f"pin_memory was asked for but is off: on {self.device} there "
                                    "is no accelerator to pin memory for")
        d["torch_num_threads"] = torch.get_num_threads()
        return d

    def close(self, now: bool = False) -> None:
        """Stop the DataLoader's workers (drop the running iterator).

        With ``now`` (the run failed or was interrupted), the worker processes are
        terminated first instead of being waited for, which the DataLoader does for up
        to 5 s each (``torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL``)."""
        if self._batches is not None:
            if now:
                it = getattr(self._batches, "gi_frame", None)
                it = it.f_locals.get("it") if it is not None else None
                for w in getattr(it, "_workers", []) or []:
                    if w.is_alive():
                        w.terminate()
            self._batches.close()
            self._batches = None
        self._running_loss = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(now=exc_type is not None)


def build_workload(config: WorkloadConfig | None = None, *, progress: bool = True) -> Workload:
    """Build model, optimiser, dataset and DataLoader for ``config``.

    Parameters
    ----------
    config : WorkloadConfig, optional
        ``None`` = :meth:`WorkloadConfig.for_device` on the best device present.
    progress : bool
        Progress bar while generating the synthetic dataset.

    Returns
    -------
    Workload

    Raises
    ------
    KitError
        Bad settings, a device that is not there, or too few images for one batch.
    KitFileError
        A Food-101 path that holds no Food-101.
    """
    config = (config or WorkloadConfig.for_device()).validate()
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return _build_ddp_workload(config, progress)
    device = resolve_device(config.device)
    dataset, data = make_dataset(config, progress=progress)
    loader = make_loader(dataset, config, device)
    model, opt = make_model(config, device)
    return Workload(config=config, device=device, model=model, optimizer=opt, loader=loader, data=data)


# --------------------------------------------------------------------------- torchrun
#: The environment variables ``torchrun`` sets in every process it starts
#: (PyTorch docs, "torchrun (Elastic Launch)": ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
#: ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_env() -> dict | None:
    """This process's place in a ``torchrun`` launch, or ``None`` outside one.

    Returns
    -------
    dict or None
        ``rank``, ``local_rank``, ``world_size``, ``local_world_size`` (int) read from
        the variables in :data:`TORCHRUN_VARS`; ``None`` when ``RANK`` and
        ``WORLD_SIZE`` are not both set.

    Raises
    ------
    KitError
        The variables are set but not whole numbers.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        world = int(os.environ["WORLD_SIZE"])
        return {"rank": int(os.environ["RANK"]), "local_rank": int(os.environ.get("LOCAL_RANK", 0)),
                "world_size": world,
                "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", world))}
    except ValueError:
        raise KitError("RANK, LOCAL_RANK, WORLD_SIZE or LOCAL_WORLD_SIZE is not a whole number: "
                       + ", ".join(f"{k}={os.environ.get(k)!r}" for k in TORCHRUN_VARS[:4])) from None


def init_distributed(device: str = "auto") -> tuple:
    """Join the process group that ``torchrun`` set up, on the right backend.

    NCCL (``"nccl"``) on CUDA GPUs, one GPU per rank (``cuda:LOCAL_RANK``): NCCL
    refuses two ranks on one GPU ("Duplicate GPU detected"), because each rank's
    communicator owns its device. Gloo (``"gloo"``) on the CPU. ``device="auto"``
    picks NCCL when this host has at least ``LOCAL_WORLD_SIZE`` GPUs, else Gloo on
    the CPU.

    Parameters
    ----------
    device : str
        ``"auto"``, ``"cuda"`` or ``"cpu"`` (a ``cuda:N`` index is replaced by
        ``LOCAL_RANK``).

    Returns
    -------
    (torch.device, str)
        This rank's device and the backend in use. Already joined: the existing
        group's backend.

    Raises
    ------
    KitError
        Not launched by ``torchrun``; ``cuda`` asked for with fewer GPUs on this host
        than ranks on it (the message says to use ``--device cpu`` for Gloo).
    """
    import torch
    import torch.distributed as dist
    env = torchrun_env()
    if env is None:
        raise KitError("not launched by torchrun (RANK and WORLD_SIZE are not set): run e.g. "
                       "torchrun --nproc_per_node=2 -m kitlib profile --device cpu")
    name = str(device or "auto").split(":")[0].lower()
    n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if name == "cuda" and n_gpu < env["local_world_size"]:
        raise KitError(f"{env['local_world_size']} ranks on this host but {n_gpu} GPU(s): NCCL needs one "
                       "GPU per rank (each rank's communicator owns its device; two ranks on one GPU "
                       "fail with 'Duplicate GPU detected'). Use --device cpu (Gloo), or "
                       f"--nproc_per_node={max(n_gpu, 1)}")
    use_gpu = name == "cuda" or (name == "auto" and n_gpu >= env["local_world_size"] and n_gpu > 0)
    if use_gpu:
        dev = torch.device("cuda", env["local_rank"])
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        kw = {"device_id": dev} if use_gpu else {}
        dist.init_process_group(backend=backend, **kw)
    return dev, dist.get_backend()


def _build_ddp_workload(config: WorkloadConfig, progress: bool) -> Workload:
    """:func:`build_workload` inside an initialised process group: the model wrapped
    in ``DistributedDataParallel``, a ``DistributedSampler`` shard per rank, the
    synthetic dataset generated by rank 0 before the others read it."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler
    rank, world = dist.get_rank(), dist.get_world_size()
    if config.straggler_rank is not None and config.straggler_rank >= world:
        raise KitError(f"straggler_rank {config.straggler_rank} is not a rank of this run "
                       f"(ranks 0..{world - 1})")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    if rank != 0:
        dist.barrier()                      # rank 0 makes the dataset first
    dataset, data = make_dataset(config, progress=progress and rank == 0)
    if rank == 0:
        dist.barrier()
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=config.shuffle,
                                 seed=config.seed, drop_last=config.drop_last)
    loader = make_loader(dataset, config, device, sampler=sampler)
    model, opt = make_model(config, device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    return Workload(config=config, device=device, model=ddp, optimizer=opt, loader=loader, data=data,
                    rank=rank)


def rss_bytes() -> int | None:
    """The process's resident set size now, in bytes: the second field of
    ``/proc/self/statm`` (pages, proc(5)) times the page size; ``None`` where there is no
    ``/proc`` (not Linux). It counts every allocation of the process, the C++ ones that
    torch.profiler's memory records and ``tracemalloc`` do not see included."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def trim_heap() -> None:
    """Hand the C heap's free pages back to the OS (glibc's ``malloc_trim(0)``; nothing
    elsewhere), so that the RSS measured next follows what the process keeps: memory a
    finished job freed would otherwise be reused without the RSS moving."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def load_1min() -> float | None:
    """The machine's 1-minute load average (``os.getloadavg()[0]``: processes running or
    waiting for a core, averaged over about a minute); ``None`` where the OS has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def time_steps(workload: Workload, steps: int = 10, *, warmup: int = 0, annotate: bool = True,
               progress: bool = False, process: dict | None = None) -> list:
    """Wall-clock time of training steps with no profiler running.

    Each step is timed as ``perf_counter_ns()`` before :meth:`Workload.step`, then
    :func:`synchronize` (``torch.cuda.synchronize``) so the GPU work is finished,
    then ``perf_counter_ns()`` again — the method of the reference recording's
    ``step_times.json``.

    Parameters
    ----------
    workload : Workload
    steps : int
        Steps to time.
    warmup : int
        Untimed steps first (cuDNN heuristics, allocator, loader workers).
    annotate : bool
        Keep the ``record_function``/NVTX labels (as the reference did). They cost
        next to nothing while no profiler or Nsight Systems is attached.
    progress : bool
        Show a progress bar.
    process : dict, optional
        Filled with what the process and the machine did during the timed steps (a
        series of calls adds to it): ``rss_bytes_after_step`` (:func:`rss_bytes` after
        each step), ``loadavg_1min`` (:func:`load_1min` before and after the steps),
        ``process_cpu_s`` (``time.process_time()``: this process's CPU time, all its
        threads, not the loader workers') and ``wall_s`` (``perf_counter``), and
        ``cpu_count`` (``os.cpu_count()``). CPU time well below the wall time with a
        load above the cores means the process waited for a core. The heap's free pages
        are handed back to the OS first (:func:`trim_heap`).

    Returns
    -------
    list of float
        One wall time per step in milliseconds, in order.
    """
    from tqdm.auto import tqdm
    for _ in range(warmup):
        workload.step(annotate=annotate)
    workload.sync()
    out, rss = [], []
    if process is not None:
        trim_heap()
    load0, cpu0, wall0 = load_1min(), time.process_time(), time.perf_counter()
    for _ in tqdm(range(steps), desc="timing", unit="step", disable=not progress, leave=False):
        t0 = time.perf_counter_ns()
        workload.step(annotate=annotate)
        workload.sync()
        out.append(ns_to_ms(time.perf_counter_ns() - t0))
        if process is not None:
            rss.append(rss_bytes())
    if process is not None:
        process.setdefault("rss_bytes_after_step", []).extend(rss)
        process.setdefault("loadavg_1min", []).extend([load0, load_1min()])
        process["process_cpu_s"] = round(process.get("process_cpu_s", 0) + time.process_time() - cpu0, 4)
        process["wall_s"] = round(process.get("wall_s", 0) + time.perf_counter() - wall0, 4)
        process["cpu_count"] = os.cpu_count()
    return out
