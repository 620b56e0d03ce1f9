"""The workload the course profiles: ResNet-50 training on 101 food-like classes, built as the
reference recordings in ``data/reference/`` were (``how_captured/capture.py``).

Model torchvision ``resnet50(weights=None, num_classes=101)``, channels-last, fp32; SGD (lr 0.1,
momentum 0.9, weight decay 1e-4), cross-entropy; Food-101 when the learner has it, else a
synthetic 101-class JPEG ``ImageFolder`` cut from scikit-image's sample photographs;
``RandomResizedCrop``, flip, ``ToTensor``, ImageNet ``Normalize``. :func:`train_step` labels
its phases for torch.profiler and NVTX alike (:data:`LABELS`). Nothing is downloaded unless
the learner calls :func:`download_food101`.

Sources: docs/SOURCES.md#workload-reference"""
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

#: The phase labels of :func:`train_step` (:mod:`kitlib.phases`), for both tools.
LABELS = PHASE_LABELS

NUM_CLASSES = 101
#: 14 batches of 128, as in the reference recordings.
DEFAULT_SYNTHETIC_IMAGES = 1792
#: The scikit-image photographs of the synthetic dataset, in the reference's order.
SYNTHETIC_SOURCES = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
                     "immunohistochemistry", "retina", "cat", "colorwheel")

#: The models :attr:`WorkloadConfig.model` can name, with the manifest's description.
MODELS = {"resnet50": f"torchvision resnet50(weights=None, num_classes={NUM_CLASSES})",
          "small_cnn": f"small CNN: Conv2d(3,16,3,stride 2)-BatchNorm-ReLU, Conv2d(16,32,3,stride 2)-"
                       f"BatchNorm-ReLU, global average pool, Linear(32,{NUM_CLASSES})",
          "deep_cnn": f"deep narrow CNN: Conv2d(3,16,3,stride 4)-BatchNorm-ReLU, then 24 x [Conv2d(16,16,3,"
                      f"padding 1)-BatchNorm-ReLU], global average pool, Linear(16,{NUM_CLASSES}): 102 small "
                      f"parameter tensors"}
DEEP_CNN_BLOCKS = 24
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_SYNTHETIC_VERSION = 1   # bump when the generator's output changes
_COMPLETE = ".complete.json"


def _default_workers() -> int:
    return min(8, os.cpu_count() or 1)


@dataclass
class WorkloadConfig:
    """Every setting of the training workload, stored in each capture's manifest.

    Reference values in brackets. ``batch_size`` [128]; ``steps``: active (or timed) steps,
    ``None`` = the recipe's; ``device``: ``auto``, ``cuda``, ``cuda:N`` or ``cpu``;
    ``num_workers`` [8; default ``min(8, CPUs)``]; ``pin_memory`` (``None`` = on for a GPU);
    ``persistent_workers`` [False], ``prefetch_factor`` (``None`` = PyTorch's 2; both need
    workers); ``shuffle``, ``drop_last`` [True]; ``image_size``: the crop's side [224];
    ``data_root``: the folder holding ``food-101/`` (``None``: ``KITLIB_FOOD101``, else
    synthetic); ``synthetic_images`` (>= 101), ``synthetic_px`` [512] and ``cache_dir`` of the
    synthetic dataset; ``data_load_covers_h2d``: ``data_load`` also covers the
    ``.to(device)`` submission and there is no ``h2d`` range [False; True in ``nsys_8step``];
    ``channels_last`` [True]; ``lr``, ``momentum``, ``weight_decay``; ``seed`` (weights and
    crops); ``model``: a key of :data:`MODELS`.

    Planted costs (the clinic, :mod:`kitlib.capture.clinic`), all off in the reference:
    ``straggler_rank``/``straggler_ms``/``straggler_label`` (under torchrun that rank sleeps
    each step, in a ``straggler_delay`` range unless unlabelled); ``pre_resize_px`` (a
    ``Resize`` before the crop); ``input_channels_last`` (``None`` = as ``channels_last``);
    ``contiguous_blocks`` (every block ends with ``x.contiguous()``); ``non_blocking`` [True];
    ``foreach``/``fused`` for SGD (``None`` = PyTorch's default); ``sync_every_step``
    (``loss.item()`` each step); ``detect_anomaly``; ``keep_loss_tensor`` (a running loss kept
    as a tensor, so every step's graph stays alive).

    Sources: docs/SOURCES.md#workload-pitfalls"""

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
        """Defaults that suit the device (``None`` overrides are ignored): on a GPU the reference
        (batch 128, 224 px, 1,792 images, ``min(8, CPUs)`` workers); on the CPU batch 8, 112 px,
        3 steps, 202 images, ``min(2, CPUs)`` workers. Raises :class:`KitError` as
        :func:`resolve_device`."""
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
        """``len(loader)``: Food-101's 75,750 training images when found, else ``synthetic_images``,
        over ``batch_size`` (rounded down with ``drop_last``, else up)."""
        n = 75_750 if find_food101(self.data_root) is not None else int(self.synthetic_images)
        b = int(self.batch_size)
        return n // b if self.drop_last else -(-n // b)

    def validate(self) -> "WorkloadConfig":
        """Return ``self`` when every setting is in range; else raise :class:`KitError` (before
        the DataLoader would raise a bare ``ValueError``)."""
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
        """The manifest's ``workload``: every field as JSON, with ``model``, ``optimizer``, ``loss``,
        ``transform``, ``labels`` and ``data_load_covers`` described in words."""
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
    """:data:`LABELS`, without ``"h2d"`` when ``data_load`` covers the transfer."""
    return tuple(x for x in LABELS if not (data_load_covers_h2d and x == "h2d"))


def resolve_device(device: str = "auto"):
    """A ``torch.device`` for ``"auto"``, ``"cuda"``, ``"cuda:N"`` or ``"cpu"`` (``auto``: GPU 0
    when ``torch.cuda.is_available()``).

    Raises :class:`KitError`: a GPU asked for where torch sees none (saying whether the build
    has CUDA), an index out of range, or an unknown name."""
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


@functools.lru_cache(maxsize=1)
def _nvtx_backend():
    """``(push, pop)``: ``torch.cuda.nvtx`` with CUDA, else the ``nvtx`` package, else no-ops."""
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
    """Label a block for both tools: an NVTX range and a ``record_function`` range of the same
    name (``annotate=False``: no label). Both cost next to nothing when no tool listens."""
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
    """One training step, its phases labelled for torch.profiler and NVTX alike: ``data_load``
    (``next(batches)``; with ``data_load_covers_h2d`` also the transfer), ``h2d`` (the
    ``.to(device)`` submissions, then ``channels_last``), ``forward`` (model and loss),
    ``backward`` (``zero_grad`` and ``backward``), ``optimizer`` (``step``).

    ``step_label`` wraps the whole step in a range of that name (``torch_step#3``); ``marks``
    gets one dict of ``perf_counter_ns`` stamps (``next_start_ns``, ``next_end_ns``,
    ``step_submitted_ns``: the format of ``cold_start_8step/wallclock.json``);
    ``sync_every_step`` reads ``loss.item()``; ``detect_anomaly`` runs forward and backward
    under ``set_detect_anomaly(True)``. Returns the 0-d loss on the device, its GPU work
    possibly still running (:func:`synchronize` before reading a clock)."""
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
    """The loader's batches forever, a new epoch (a new iterator) whenever one ends. Raises
    :class:`KitError` when the loader yields no batch at all."""
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


def transform(image_size: int = 224, pre_resize_px: int | None = None):
    """The reference's training transform: optional ``Resize(pre_resize_px)``,
    ``RandomResizedCrop(image_size)``, flip, ``ToTensor``, ``Normalize`` (ImageNet): a float32
    ``[3, image_size, image_size]`` tensor."""
    from ..readers.bundle import import_torchvision
    T = import_torchvision().transforms
    first = [T.Resize(pre_resize_px)] if pre_resize_px else []
    return T.Compose([*first, T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def find_food101(data_root=None) -> Path | None:
    """The ``root`` to pass to ``Food101(root)`` (the folder holding ``food-101/``) from
    ``data_root`` or ``KITLIB_FOOD101``; ``None`` when neither is set (synthetic data).

    Raises :class:`KitFileError`: a path given that holds no ``food-101/meta/train.json`` and
    ``food-101/images/``."""
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
    """Raise :class:`KitFileError` naming the first image ``meta/train.json`` lists that is
    missing (or when it is not such a mapping), before a worker meets it mid-epoch."""
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
    """Download Food-101 (about 5 GB) into ``root`` with ``torchvision.datasets.Food101(root,
    download=True)``, only when asked; returns ``root``. ``progress`` is unused (torchvision
    shows its own bar)."""
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
    """Generate (once) a 101-class JPEG ``ImageFolder`` and return its folder.

    Image i is a random crop (a third to all of each side) of a :data:`SYNTHETIC_SOURCES`
    photograph (matplotlib's ``grace_hopper.jpg`` without scikit-image), ``width`` px wide and
    3/4 to 1 of it high, flipped half the time, JPEG quality 90, in ``class_{i % 101:03d}``;
    with the same seed the reference's sequence. Default folder:
    ``cache_dir()/synthetic_food/<name>``. Written into a temporary sibling and renamed, so an
    interrupted run leaves nothing; a finished folder holds ``.complete.json`` and is reused.

    Raises :class:`KitError` (``n_images`` below 101, no photograph readable) or
    :class:`KitFileError` (a non-empty unfinished folder)."""
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
    """A synthetic dataset's ``.complete.json``; :class:`KitFileError` when it has none."""
    p = Path(root) / _COMPLETE
    if not p.is_file():
        raise KitFileError(root, "not a finished synthetic dataset (no .complete.json)")
    return json.loads(p.read_text())


def make_dataset(config: WorkloadConfig, *, progress: bool = True):
    """``(dataset, description)`` for ``config``: ``Food101(root, split="train")`` when found,
    else the synthetic ``ImageFolder``, with :func:`transform`. ``description``: ``dataset``
    (one line), ``dataset_kind`` (``food101``/``synthetic``), ``dataset_root``,
    ``dataset_images``. Raises :class:`KitFileError` as :func:`find_food101`."""
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
    """The seeded DataLoader for ``config`` (``pin_memory`` only for a GPU; a ``sampler`` does
    the shuffling). Raises :class:`KitError` when the dataset (this rank's share) holds fewer
    images than one batch with ``drop_last``."""
    import torch
    config.validate()
    n_images = len(sampler) if sampler is not None else len(dataset)
    if config.drop_last and n_images < config.batch_size:
        raise KitError(f"the dataset (this rank's share) holds {n_images} images, fewer than one batch of "
                       f"{config.batch_size} (drop_last=True): use a smaller batch or more images")
    dev = torch.device(device) if device is not None else resolve_device(config.device)
    # pinned memory only for a GPU: on the CPU torch ignores it with a warning
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
    """End every block of ``model`` with ``x.contiguous()`` (:attr:`WorkloadConfig.contiguous_blocks`)."""
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
    """``(model, optimizer)`` on ``device``: the :data:`MODELS` entry in training mode
    (channels-last when asked, weights from ``config.seed``) and its SGD."""
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


#: Set (by ``profile`` on Ctrl-C or SIGTERM) to stop every :class:`Workload` at its next step.
STOP = threading.Event()


@dataclass
class Workload:
    """A ready-to-run workload (:func:`build_workload`): ``config``, ``device``, ``model``,
    ``optimizer``, ``loader``, ``data`` (:func:`make_dataset`'s description) and ``rank``
    under torchrun (``None`` in one process)."""

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
        """One :func:`train_step` (the straggler rank sleeps first); returns the loss without
        waiting for the GPU. Raises ``KeyboardInterrupt`` when :data:`STOP` is set, so a stop that
        Python swallowed still ends the run at the next step."""
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
        """Wait for the device (:func:`synchronize`)."""
        synchronize(self.device)

    def describe(self) -> dict:
        """The manifest's ``workload``: :meth:`WorkloadConfig.to_dict`, the dataset, the resolved
        device, the ``pin_memory`` in use and ``torch_num_threads``."""
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
        """Stop the DataLoader's workers; with ``now`` terminate them instead of waiting up to 5 s
        each."""
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
    """Model, optimiser, dataset and DataLoader for ``config`` (default
    :meth:`WorkloadConfig.for_device`); inside a process group, the DDP form. Raises
    :class:`KitError` or :class:`KitFileError` as the functions it calls."""
    config = (config or WorkloadConfig.for_device()).validate()
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return _build_ddp_workload(config, progress)
    device = resolve_device(config.device)
    dataset, data = make_dataset(config, progress=progress)
    loader = make_loader(dataset, config, device)
    model, opt = make_model(config, device)
    return Workload(config=config, device=device, model=model, optimizer=opt, loader=loader, data=data)


#: The variables ``torchrun`` sets in every process it starts.
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_env() -> dict | None:
    """``rank``, ``local_rank``, ``world_size``, ``local_world_size`` from torchrun's
    variables (:data:`TORCHRUN_VARS`); ``None`` outside torchrun. :class:`KitError` when they
    are not whole numbers."""
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
    """Join torchrun's process group: NCCL with one GPU per rank (``cuda:LOCAL_RANK``), else Gloo
    on the CPU (``auto``: NCCL when the host has a GPU per local rank). Returns ``(device,
    backend)``.

    Raises :class:`KitError`: not under torchrun; ``cuda`` with fewer GPUs than local ranks.

    Sources: docs/SOURCES.md#nccl-one-gpu-per-rank"""
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
    """:func:`build_workload` in a process group: DDP model, a ``DistributedSampler`` shard per
    rank, the dataset made by rank 0 first."""
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
    """The process's resident set size in bytes (``/proc/self/statm``; ``None`` without
    ``/proc``): every allocation, C++ ones included."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def trim_heap() -> None:
    """glibc's ``malloc_trim(0)`` (nothing elsewhere), so the next RSS follows what is kept."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def load_1min() -> float | None:
    """The machine's 1-minute load average (``os.getloadavg()[0]``), or ``None``."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def time_steps(workload: Workload, steps: int = 10, *, warmup: int = 0, annotate: bool = True,
               progress: bool = False, process: dict | None = None) -> list:
    """Wall-clock ms of ``steps`` training steps with no profiler: ``perf_counter_ns`` around
    :meth:`Workload.step` and :func:`synchronize`, after ``warmup`` untimed steps (the method
    of the reference's ``step_times.json``).

    ``process`` (a dict, added to across calls) gets ``rss_bytes_after_step``,
    ``loadavg_1min`` (before and after), ``process_cpu_s``, ``wall_s`` and ``cpu_count``; the
    heap is trimmed first (:func:`trim_heap`)."""
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
