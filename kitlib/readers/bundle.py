"""The capture bundle: one folder, one ``manifest.json``, the files a tool wrote.

Every recording travels through the kit as a bundle, live (``runs/…``) or shipped
(``data/reference/…``), and lessons read both through :func:`open_capture`. The manifest
holds ``format`` (``kitlib-bundle/1``), ``kind`` (``torch_profiler``, ``nsys``,
``timing``, …), ``name``, ``origin`` (``recorded``/``live``), ``created``, ``recipe``,
``workload``, ``provenance`` (:func:`software_provenance`), ``notes`` and ``files``
(``{name: {sha256, bytes, what}}``); every file is checked against its sha256 when read.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..settings import value as setting
from ..errors import BundleError, KitError, KitFileError
from .files import check_regular_file, read_json_file, sha256_of

FORMAT = "kitlib-bundle/1"
MANIFEST = "manifest.json"


def software_provenance(import_torch: bool = True) -> dict:
    """What this Python process runs on: Python, OS, CPU count and, where importable, torch,
    torchvision, CUDA, cuDNN, the GPU and the driver (from ``nvidia-smi``).

    ``import_torch=False`` (torch not imported yet) reads the same facts without importing
    it: the packages' ``version.py``, the ``nvidia-cudnn`` wheel, ``nvidia-smi``.

    Returns
    -------
    dict
        ``python, os, cpu_count, date`` always; ``torch, torchvision, cuda, cudnn, gpu,
        gpu_count, gpu_memory_bytes, compute_capability, driver`` (``None`` when unknown);
        without torch, ``probe`` says where the facts came from.
    """
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "os": platform.platform(),
        "cpu_count": os.cpu_count(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": None, "torchvision": None, "cuda": None, "cudnn": None,
        "gpu": None, "gpu_count": 0, "gpu_memory_bytes": None,
        "compute_capability": None, "driver": None,
    }
    if not import_torch and "torch" not in sys.modules:
        info.update(_installed_software(), probe="installed packages and nvidia-smi (torch not imported)")
        return info
    try:
        import torch
        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        try:
            info["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # cuDNN missing from a CPU build
            info["cudnn"] = None
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            info.update(gpu=p.name, gpu_count=torch.cuda.device_count(),
                        gpu_memory_bytes=int(p.total_memory),
                        compute_capability=f"{p.major}.{p.minor}")
            info["driver"] = (nvidia_smi_query("driver_version") or [[None]])[0][0]
    except ImportError:
        pass
    try:
        info["torchvision"] = import_torchvision().__version__
    except ImportError:
        pass
    return info


def import_torchvision():
    """``import torchvision``, with a one-line :class:`~kitlib.errors.KitError` naming both
    versions, the torch it was built for and the fix when it does not belong with the
    installed torch (``operator torchvision::nms does not exist``).

    Raises
    ------
    ImportError
        torchvision is not installed.
    KitError
        It is installed but does not load beside this torch.
    """
    try:
        import torchvision
        return torchvision
    except ImportError as e:
        if getattr(e, "name", None) == "torchvision" or "No module named 'torchvision'" in str(e):
            raise
        cause = e
    except (RuntimeError, OSError, AttributeError) as e:
        cause = e
    from importlib import metadata
    try:
        import torch
        torch_v = torch.__version__
    except Exception:
        torch_v = _version_file("torch").get("__version__") or "?"
    tv = _version_file("torchvision").get("__version__") or "?"
    try:
        wants = next((r.split(";")[0].replace(" ", "") for r in metadata.requires("torchvision") or ()
                      if r.replace(" ", "").startswith("torch==")), "")
    except metadata.PackageNotFoundError:
        wants = ""
    built = f" (it was built for {wants.replace('==', ' ')})" if wants else ""
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    base = torch_v.split("+")[0]
    parts = base.split(".")
    # PyTorch's compatibility table: torch 2.N is paired with torchvision 0.(N+15)
    pair = f"'torchvision==0.{int(parts[1]) + 15}.*'" if len(parts) > 1 and parts[0] == "2" and parts[1].isdigit() \
        else "the torchvision of its release"
    raise KitError(f"torchvision {tv} does not load beside torch {torch_v}{built}: {first}. Install the pair "
                   f"together, from the same index: python -m pip install torch=={base} {pair}") from None


def _version_file(package: str) -> dict:
    """The string constants of an installed package's ``version.py`` (``__version__``,
    ``cuda``, …), read as text: the package is not imported."""
    import ast
    import importlib.util
    try:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            return {}
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text())
    except (OSError, SyntaxError, ValueError, ImportError):
        return {}
    out = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            out[target.id] = value.value
    return out


def _installed_software() -> dict:
    """torch, torchvision, CUDA, cuDNN and the GPUs without importing torch (see
    :func:`software_provenance`)."""
    from importlib import metadata
    info: dict[str, Any] = {}
    t, tv = _version_file("torch"), _version_file("torchvision")
    info["torch"], info["cuda"] = t.get("__version__"), t.get("cuda")
    info["torchvision"] = tv.get("__version__")
    if info["cuda"]:
        # torch's cudnn.version(): major * 10000 + minor * 100 + patch (cuDNN >= 9), here
        # from the wheel torch loads it from; a system-wide cuDNN is not looked for
        for dist in (f"nvidia-cudnn-cu{str(info['cuda']).split('.')[0]}",):
            try:
                major, minor, patch = (int(x) for x in metadata.version(dist).split(".")[:3])
                info["cudnn"] = major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch
            except (metadata.PackageNotFoundError, ValueError):
                pass
    gpus = nvidia_smi_query("name,memory.total,compute_cap,driver_version")
    if gpus:
        name, mem_mib, cc, driver = gpus[0]
        info.update(gpu=name, gpu_count=len(gpus), compute_capability=cc, driver=driver)
        try:
            info["gpu_memory_bytes"] = int(float(mem_mib)) * 2**20
        except ValueError:
            pass
    return info


def nvidia_smi_query(fields: str) -> list:
    """``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits``: one list of strings
    per GPU, one string per field, as nvidia-smi prints them (its units: MiB, MHz...).

    ``[]`` where nvidia-smi is not on the path, fails or takes over 20 s: never raises.
    """
    import shutil
    import subprocess
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return []
    return [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]


def write_bundle(folder, *, kind: str, name: str, files: dict, recipe: dict | None = None,
                 workload: dict | None = None, provenance: dict | None = None,
                 origin: str = "live", notes: str = "", extra: dict | None = None) -> Path:
    """Write ``manifest.json`` for files already placed in ``folder``.

    Parameters
    ----------
    folder : path
        The bundle folder; the files must already be inside it.
    kind, name, origin, notes : str
        See the module docstring.
    files : dict
        ``{file name: one-line description}``. Each file's sha256 and size are taken now.
    recipe, workload, provenance, extra : dict, optional
        Stored as given (``extra`` keys are merged into the top level).

    Returns
    -------
    pathlib.Path
        The manifest's path.

    Raises
    ------
    BundleError
        If a listed file is not in ``folder``.
    """
    folder = Path(folder)
    entries = {}
    for fname, what in files.items():
        p = folder / fname
        if not p.is_file():
            raise BundleError(p, "listed in the manifest but not written")
        entries[fname] = {"sha256": sha256_of(p), "bytes": p.stat().st_size, "what": what}
    manifest = {
        "format": FORMAT, "kind": kind, "name": name, "origin": origin,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "recipe": recipe or {}, "workload": workload or {},
        "provenance": provenance if provenance is not None else software_provenance(),
        "notes": notes, "files": entries,
    }
    if extra:
        manifest.update(extra)
    out = folder / MANIFEST
    out.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    return out


class StepTimes(dict):
    """A bundle's ``step_times.json`` (:meth:`Capture.step_times`): a dict that keeps the
    file it was read from (``path``), so that the note under a table or figure made from it
    names its recording (:func:`kitlib.course.labels.labels_of`), not every one opened.
    """

    path: Path | None = None


@dataclass
class Capture:
    """A capture bundle opened for reading (see :func:`open_capture`).

    Attributes
    ----------
    path : pathlib.Path
        The bundle folder.
    manifest : dict
        The parsed ``manifest.json``.
    """

    path: Path
    manifest: dict
    _cache: dict = field(default_factory=dict, repr=False)
    #: What this Capture hands out (its own Trace and NsysReport, copies of the shared ones).
    _own: dict = field(default_factory=dict, repr=False, compare=False)
    #: How the bundle was found: ``"kit"`` (a name looked up in the kit's reference
    #: recordings), ``"own"`` (a name found in ``$KITLIB_REPLAY_DIR``), ``"clinic"`` (a
    #: folder of the kit's clinic, :func:`clinic_dir`) or ``"path"`` (opened by its folder).
    found_in: str = "path"

    # -- plain facts -------------------------------------------------------
    @property
    def name(self) -> str:
        """The capture's name (``manifest["name"]``, else the folder's name)."""
        return self.manifest.get("name", self.path.name)

    @property
    def kind(self) -> str:
        """What tool wrote it: ``"torch_profiler"``, ``"nsys"``, ``"timing"``, … (``"?"`` if unsaid)."""
        return self.manifest.get("kind", "?")

    @property
    def origin(self) -> str:
        """``"live"`` for a capture made on this machine, ``"recorded"`` for a shipped one."""
        return self.manifest.get("origin", "?")

    @property
    def provenance(self) -> dict:
        """What the capture ran on (``manifest["provenance"]``: GPU, driver, versions, date; see :func:`software_provenance`).
        """
        return self.manifest.get("provenance", {})

    @property
    def recipe(self) -> dict:
        """How the profiler was set up (``manifest["recipe"]``: schedule, record_shapes, …); ``{}`` if unsaid.
        """
        return self.manifest.get("recipe", {})

    @property
    def workload(self) -> dict:
        """What ran (``manifest["workload"]``: model, batch size, loader settings, …); ``{}`` if unsaid."""
        return self.manifest.get("workload", {})

    @property
    def files(self) -> list[str]:
        """The file names the manifest lists, in its order."""
        return list(self.manifest.get("files", {}))

    def has(self, fname: str) -> bool:
        """Whether the manifest lists ``fname``."""
        return fname in self.manifest.get("files", {})

    def file(self, fname: str) -> Path:
        """Path of one of the bundle's files, after checking it against its sha256.

        Raises
        ------
        BundleError
            If the manifest does not list the file, the file is missing, is a link that
            leads out of the bundle folder (links inside it are followed), is not a
            regular file (a folder, a named pipe, a device), or its sha256 differs from
            the manifest's (the file was changed or half-copied).
        """
        if fname in self._cache.get("checked", set()):
            return self.path / fname
        entries = self.manifest.get("files", {})
        if fname not in entries:
            raise BundleError(self.path, f"this {self.kind} bundle has no file {fname!r} "
                                         f"(it has: {', '.join(entries) or 'none'})")
        p = self.path / fname
        _own_file(self.path, p)
        if not p.exists():
            raise BundleError(p, "listed in manifest.json but missing from the folder")
        try:
            check_regular_file(p)                  # a FIFO would block the read, a device never end
        except KitFileError as e:
            raise BundleError(p, e.problem) from None
        want = entries[fname].get("sha256")
        if want and sha256_of(p) != want:
            raise BundleError(p, "sha256 differs from manifest.json: the file was changed "
                                 "or copied incompletely")
        self._cache.setdefault("checked", set()).add(fname)
        return p

    def read_json(self, fname: str):
        """Parse one of the bundle's JSON files (``.json`` or ``.json.gz``)."""
        return read_json_file(self.file(fname))

    # -- the usual contents --------------------------------------------------
    @property
    def trace(self):
        """The bundle's torch.profiler trace as a :class:`kitlib.model.Trace` (loaded once;
        the manifest's torch version decides the event tree's Python-frame rule).

        Each Capture has a Trace of its own (:meth:`kitlib.model.Trace.copy`, which shares
        the read-only tables: no time, no memory), so what one lesson cell does to its
        trace (``trace.ops = ...``, an edit to ``trace.meta``) never shows up in a trace
        another ``open_capture`` call hands out.
        """
        if "trace" not in self._own:
            if "trace" not in self._cache:
                from .trace import load_trace
                self._cache["trace"] = load_trace(self.file(self.first_of("trace.json.gz", "trace.json")),
                                                  torch_version=self.provenance.get("torch"))
            self._own["trace"] = self._cache["trace"].copy()
        return self._own["trace"]

    @property
    def nsys(self):
        """The bundle's Nsight Systems export as a :class:`kitlib.model.NsysReport` (loaded
        once; each Capture has a report of its own, as :attr:`trace`).
        """
        if "nsys" not in self._own:
            if "nsys" not in self._cache:
                from .nsys import load_nsys
                self._cache["nsys"] = load_nsys(self.file("report.sqlite"))
            self._own["nsys"] = self._cache["nsys"].copy()
        return self._own["nsys"]

    @property
    def memory_snapshot(self):
        """The bundle's ``memory_snapshot.pickle`` as a
        :class:`kitlib.readers.snapshot.MemorySnapshot` (loaded once).
        """
        if "memory_snapshot" not in self._cache:
            from .snapshot import load_memory_snapshot
            self._cache["memory_snapshot"] = load_memory_snapshot(self.file("memory_snapshot.pickle"))
        return self._cache["memory_snapshot"]

    def step_times(self) -> dict:
        """``step_times.json``: ``{series name: [step wall time in ms, ...]}``."""
        times = StepTimes(self.read_json("step_times.json"))
        times.path = self.path / "step_times.json"
        return times

    def key_averages(self) -> dict:
        """The profiler's own ``key_averages()`` rows (``by_name``, ``by_input_shape``,
        ``by_stack_5``; times in µs, memory in bytes, ``flops``).
        """
        return self.read_json(self.first_of("key_averages.json", "key_averages.json.gz"))

    def first_of(self, *names: str) -> str:
        """The first of ``names`` that the manifest lists (the name itself, a file of the
        bundle folder), e.g. the trace whether it was written gzipped or not.

        Raises
        ------
        BundleError
            The bundle has none of them: the message lists the files it has.
        """
        for n in names:
            if self.has(n):
                return n
        raise BundleError(self.path, f"this {self.kind} bundle has none of {', '.join(names)} "
                                     f"(it has: {', '.join(self.files) or 'none'})")

    @property
    def whose(self) -> str:
        """Whose recording this is: ``"kit's H200 reference"`` (in the kit's reference folder and
        ``origin == "recorded"``), ``"your own recording (…)"`` (``$KITLIB_REPLAY_DIR``), ``"kit's
        … clinic case"``, ``"live capture (…)"`` or ``"recording (…)"``; a live run written into
        the reference folder says so (``"… in the kit's reference folder, not a kit reference"``).
        """
        gpu = _short_gpu(self.provenance.get("gpu"))
        if self.found_in == "kit":
            if self.origin == "recorded":
                return f"kit's {gpu} reference"
            what = "live capture" if self.origin == "live" else "recording"
            return f"{what} ({gpu}) in the kit's reference folder, not a kit reference"
        if self.found_in == "clinic":
            return f"kit's {gpu} clinic case"
        if self.found_in == "own":
            return f"your own recording ({gpu})"
        if self.origin == "live":
            return f"live capture ({gpu})"
        return f"recording ({gpu})"

    @property
    def label(self) -> str:
        """A short label for the tables and figures made from this capture: its name,
        whose recording it is (:attr:`whose`) and the date it was recorded, e.g.
        ``"profiler_5step: kit's H200 reference, 2026-11-29"``.
        """
        date = str(self.provenance.get("date") or self.manifest.get("created") or "")[:10]
        return f"{self.name}: {self.whose}" + (f", {date}" if date else "")

    def describe(self) -> str:
        """A few lines on what this capture is and where it came from."""
        p = self.provenance
        gpu = p.get("gpu") or "no GPU (CPU)"
        lines = [f"{self.name} ({self.kind}, {self.origin}): {self.whose}",
                 f"  device:   {gpu}" + (f", driver {p['driver']}" if p.get("driver") else ""),
                 f"  software: torch {p.get('torch')}, torchvision {p.get('torchvision')}, "
                 f"CUDA {p.get('cuda')}, cuDNN {p.get('cudnn')}, Python {p.get('python')}",
                 f"  recorded: {p.get('date', '?')} on {p.get('os', '?')}, {p.get('cpu_count', '?')} CPUs",
                 f"  files:    {', '.join(self.files)}"]
        from ..units import wrapped
        return wrapped("\n".join(lines), indent="          ")


def _short_gpu(name) -> str:
    """``"NVIDIA H200"`` → ``"H200"``; no GPU → ``"CPU"``."""
    if not name:
        return "CPU"
    return str(name).replace("NVIDIA ", "").replace("GeForce ", "").strip()


#: The environment variable naming a folder of the learner's own bundles, named like the
#: kit's reference recordings they replace (see :func:`find_recording`).
REPLAY_DIR_ENV = "KITLIB_REPLAY_DIR"


def is_recording_name(path) -> bool:
    """Whether ``path`` is a bare name (``"profiler_5step"``, no folder separator, not
    absolute) rather than a path.
    """
    text = os.fspath(path)
    return bool(text) and "/" not in text and os.sep not in text and (os.altsep or "/") not in text \
        and text not in (".", "..")


def find_recording(name: str) -> tuple[Path, str]:
    """Where the recording ``name`` is read from: a bundle of that name in
    ``$KITLIB_REPLAY_DIR`` (the learner's own) wins, else the kit's (:func:`reference_dir`);
    never the working directory.

    Returns
    -------
    (pathlib.Path, str)
        The bundle folder, and ``"own"`` or ``"kit"``.

    Raises
    ------
    BundleError
        Neither place holds it; the message names both places and the known recordings.
    """
    own = setting(REPLAY_DIR_ENV)
    if own and (Path(own).expanduser() / name / MANIFEST).is_file():
        return Path(own).expanduser() / name, "own"
    kit = reference_dir() / name
    if (kit / MANIFEST).is_file():
        return kit, "kit"
    known = ", ".join(list_references()) or "none"
    where = f"{REPLAY_DIR_ENV}={own} or " if own else ""
    if not reference_dir().is_dir():
        raise BundleError(reference_dir(), f"no recording {name!r}: the kit's reference recordings are not "
                                           "installed here. Run kitlib from a checkout of the course, "
                                           "reinstall it from one (python -m pip install .), or set "
                                           "KITLIB_REFERENCE to a copy of data/reference"
                                           + (f" (and {REPLAY_DIR_ENV} holds no {name!r} either)" if own else ""))
    raise BundleError(Path(name), f"no recording of that name in {where}{reference_dir()} "
                                  f"(recordings: {known})")


def open_capture(path) -> Capture:
    """Open a capture bundle (a folder with ``manifest.json``).

    Parameters
    ----------
    path : str or os.PathLike
        The bundle folder, or its ``manifest.json``. A bare name that is a recording's
        (``"profiler_5step"``) is looked up with :func:`find_recording`
        (``$KITLIB_REPLAY_DIR``, then the kit's reference recordings), never in the
        working directory; write ``./name`` for a folder there.

    Returns
    -------
    Capture
        ``found_in`` says how it was found (``"own"``, ``"kit"`` or ``"path"``).

    Raises
    ------
    BundleError
        No such folder, no manifest, or a manifest that is not a kitlib bundle.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> cap = open_capture("profiler_5step")
    >>> cap.kind, cap.origin
    ('torch_profiler', 'recorded')
    """
    found_in = "path"
    p = Path(path)
    if is_recording_name(path) and p.name != MANIFEST:
        try:
            p, found_in = find_recording(p.name)
        except BundleError as e:
            if not p.exists():
                raise BundleError(p, f"no such capture folder, and {e.problem}") from None
    if p.name == MANIFEST:
        p = p.parent
    if found_in == "path":
        found_in = _found_in_by_place(p)
    if not p.exists():
        known = ", ".join(list_references()) or "none"
        raise BundleError(p, f"no such capture folder (reference captures: {known})")
    m = p / MANIFEST
    if not m.exists():
        raise BundleError(p, "not a capture bundle: it has no manifest.json")
    _own_file(p, m)
    manifest = read_json_file(m)                  # a folder, a FIFO, a device: refused by name
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(m, f"not a kitlib bundle manifest (expected format {FORMAT!r})")
    files = manifest.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise BundleError(m, "'files' must map each file name to {sha256, bytes, what}")
    for name in files:
        q = Path(name)
        if q.is_absolute() or ".." in q.parts:
            raise BundleError(m, f"file name {name!r} points outside the bundle folder")
    cap = Capture(path=p, manifest=manifest, found_in=found_in, _cache=_shared_cache(p, m))
    _OPENED[str(p)] = cap.label
    OPEN_LOG.append(cap.label)
    return cap


#: What the kit's own reference bundles have loaded (trace, report, snapshot), shared by every
#: Capture of the same bundle in this process: a lesson that opens ``nsys_8step`` three times,
#: or a cell that re-opens its capture to survive a kernel restart, reads each file once.
#: Keyed by folder and the stat of each of its files; the last few bundles only.
_SHARED: "OrderedDict[tuple, dict]" = OrderedDict()
_SHARED_MAX = 4


def _shared_cache(p: Path, manifest_path: Path) -> dict:
    """The ``_cache`` dict for a Capture of ``p``: shared for a bundle inside the kit's
    reference folder (read-only data shipped with the kit), a new one for any other
    (a learner's or a live bundle may be rewritten while a kernel runs)."""
    from .trace_cache import stat_signature
    here = os.path.abspath(p)
    if not _inside(here, reference_dir()):
        return {}

    def sig(f: Path):
        try:
            return tuple(stat_signature(f.stat()))
        except OSError:
            return None
    # the manifest and every file in the folder: a file changed since (a test damaging a
    # copy of the references, say) gives another key, so nothing stale is handed out
    key = (here, sig(manifest_path), tuple(sorted((f.name, sig(f)) for f in Path(p).iterdir())))
    if key in _SHARED:
        _SHARED.move_to_end(key)
    else:
        _SHARED[key] = {}
        while len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)
    return _SHARED[key]


def _found_in_by_place(p: Path) -> str:
    """``"own"`` for a folder inside ``$KITLIB_REPLAY_DIR``, ``"kit"`` inside the kit's
    reference folder, ``"clinic"`` inside the kit's clinic (:func:`clinic_dir`), else ``"path"``: a recording opened by its path is labelled as the
    same recording opened by its name would be (links are not followed, so a learner's
    folder of links to the kit's recordings stays the learner's)."""
    own = setting(REPLAY_DIR_ENV)
    for where, folder in (("own", own), ("kit", reference_dir()), ("clinic", clinic_dir())):
        if folder and _inside(p, folder):
            return where
    return "path"


def _own_file(folder, path) -> None:
    """Refuse a bundle's file that is a link leading out of the bundle's folder (a
    ``step_times.json`` linked to a system file would otherwise be read as the bundle's);
    links that stay inside it, and a bundle folder that is itself a link, are fine.

    Raises
    ------
    BundleError
        ``path: is a link to TARGET, outside the bundle folder ...``.
    """
    real, home = os.path.realpath(path), os.path.realpath(folder)
    if not _inside(real, home):
        raise BundleError(path, f"is a link to {real}, outside the bundle folder {home}: kitlib reads "
                                "only a bundle's own files (copy the file into the bundle instead)")


def _inside(path, folder) -> bool:
    """Whether ``path`` is ``folder`` or lies below it, by whole names (``own2`` is not
    inside ``own``); links are not followed."""
    folder = os.path.abspath(folder)
    return os.path.commonpath([os.path.abspath(path), folder]) == folder


#: Labels of the recordings opened in this process, by folder (see :func:`opened_labels`).
_OPENED: dict = {}
#: The label of every bundle opened, in order, one entry per :func:`open_capture` call
#: (``kitlib.course.cli.answer_key`` reads the entries a lesson's exercises added).
OPEN_LOG: list = []


def opened_labels() -> list[str]:
    """The :attr:`Capture.label` of every bundle opened in this process so far, in
    the order first opened (what a lesson's tables and figures may draw on).
    """
    return list(dict.fromkeys(_OPENED.values()))


def relabel_opened(cap: Capture) -> str:
    """Record ``cap.label`` afresh, after its caller changed what the label is made of
    (``cap.found_in``): as the label of its folder among the recordings opened
    (:func:`opened_labels`, :func:`label_for`) and as the last entry of :data:`OPEN_LOG`
    (the one its :func:`open_capture` call added). Returns the label.
    """
    _OPENED[str(cap.path)] = OPEN_LOG[-1] = cap.label
    return cap.label


#: Folders of public traces the kit ships without a manifest (by their name in the kit's
#: reference folder), and the label their tables and figures carry.
PUBLIC_LABELS = {"public-traces": "public NCCL pair (HTA's sampled A100 run)"}


def note_source(path, label: str) -> str:
    """Count ``path`` (a folder or file that is no kit bundle: a folder of public
    traces, a lesson's own CPU run) among the recordings opened, under ``label``, as
    :func:`open_capture` does for a bundle; :func:`label_for` then names it for any
    file inside. Returns ``label``.
    """
    _OPENED[os.path.abspath(path)] = label
    OPEN_LOG.append(label)
    return label


def label_for(path) -> str | None:
    """The label of the opened recording ``path`` belongs to (the bundle folder or a
    folder given to :func:`note_source`, ``path`` itself or a folder above it), or
    ``None`` when it belongs to none opened in this process.
    """
    if path is None:
        return None
    opened = {os.path.abspath(k): v for k, v in _OPENED.items()}
    p = Path(os.path.abspath(path))
    for q in (p, *p.parents):
        if str(q) in opened:
            return opened[str(q)]
    return None


def folder_label(folder) -> str:
    """The label of a folder of traces without a kit manifest: its :data:`PUBLIC_LABELS`
    entry when it is one of the kit's public folders, else ``"<name>: trace files (no kit
    manifest)"``.
    """
    folder = Path(folder)
    if folder.name in PUBLIC_LABELS and _inside(folder, reference_dir()):
        return PUBLIC_LABELS[folder.name]
    return f"{folder.name}: trace files (no kit manifest)"


def reference_dir() -> Path:
    """The folder of the kit's reference recordings: ``$KITLIB_REFERENCE``, else the checkout's
    ``data/reference``, else the copy inside an installed package (``kitlib/reference_data``).
    """
    env = setting("KITLIB_REFERENCE")
    return Path(env) if env else _data_dir("reference")


def clinic_dir() -> Path:
    """The folder of the kit's clinic recordings: ``clinic`` beside ``$KITLIB_REFERENCE``, else the
    checkout's ``data/clinic``, else the copy inside an installed package (``kitlib/clinic_data``).
    """
    if setting("KITLIB_REFERENCE"):
        return reference_dir().parent / "clinic"
    return _data_dir("clinic")


def _data_dir(name: str) -> Path:
    """``data/<name>`` of the checkout kitlib runs from, else ``kitlib/<name>_data``."""
    here = Path(__file__).resolve().parents[1]                       # kitlib/
    checkout = here.parent / "data" / name
    return checkout if checkout.is_dir() else here / f"{name}_data"


def list_references() -> list[str]:
    """Names of the recorded captures shipped with the kit."""
    d = reference_dir()
    return sorted(x.name for x in d.iterdir() if (x / MANIFEST).is_file()) if d.exists() else []
