""""Your turn" exercises: questions whose answers come from the capture in hand.

A lesson builds its questions from the capture it shows (live or recorded), so
the expected answer is always computed, never typed in, and the explanation
quotes the learner's own figures. ``check`` says right or wrong and why.
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

#: What each kind of question asks of the learner (``Question.kind``; the answer key prints it).
KINDS = {
    "recall": "a fact the lesson stated, in the learner's words or choice",
    "compute": "a figure worked out from a table or the raw rows, never read off verbatim",
    "predict": "answered before the cell that shows the outcome; the first answer is kept and shown "
               "beside the result",
    "transfer": "the lesson's idea applied to data the lesson has not printed (another recording, raw "
                "events shown as JSON, another shape, 'what changes if ...')",
}


class Misconception(str):
    """A trap's feedback naming a classic misconception (:func:`misconception`), with its ``key``."""

    key: str = ""


#: The classic misconceptions of profiling, each with the feedback that names it.
MISCONCEPTIONS = {
    "one_op_one_kernel": ("one operator = one kernel",
                          "an operator can make several launches (or none): count the launches that carry "
                          "its external id, not the operator."),
    "launch_is_kernel_time": ("launch time = kernel time",
                              "a launch's duration is how long the host took to queue the work; the kernel "
                              "runs later, on the GPU, for its own duration."),
    "self_mem_is_peak": ("Self CUDA Mem = peak",
                         "Self CUDA Mem is allocations minus frees inside the operator, summed over its "
                         "calls: a net traffic total, not the most memory held at one moment."),
    "flops_is_utilisation": ("FLOP/s = utilisation",
                             "achieved FLOP/s divided by a datasheet peak is an estimate of arithmetic "
                             "rate, not the share of time the GPU was busy, and not a hardware counter."),
    "busy_is_kernel_sum": ("busy = the sum of kernel times",
                           "kernels on several streams overlap; the device's busy time is the union of "
                           "its intervals, each moment counted once."),
    "profiled_is_unprofiled": ("a profiled step = an unprofiled step",
                               "the profiler adds work on the host (and sometimes syncs): time steps "
                               "measured without it when the question is how fast."),
}


def misconception(key: str, answer, detail: str = "") -> tuple:
    """A trap ``(answer, feedback)`` for misconception ``key`` (:data:`MISCONCEPTIONS`), the
    learner's ``answer`` holding it, ``detail`` a sentence on this question's figures.
    Raises KeyError for an unknown key (the message lists the known ones)."""
    if key not in MISCONCEPTIONS:
        raise KeyError(f"no misconception {key!r}; known: {', '.join(MISCONCEPTIONS)}")
    title, text = MISCONCEPTIONS[key]
    m = Misconception(f"a classic misconception, \"{title}\": {text} {_capital(detail)}".strip())
    m.key = key
    return (answer, m)


#: Unit factors a learner's number can be off by, per kind of unit (time, bytes, FLOPs).
_UNIT_FACTORS = {
    "time": (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9),
    "bytes": (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 2**30 / 1e9, 1e9 / 2**30, 2**20 / 1e6, 1e6 / 2**20),
    "share": (100, 0.01),
    "flops": (1e3, 1e-3, 1e12, 1e-12, 2, 0.5),
}
_UNIT_KIND = {"ns": "time", "µs": "time", "us": "time", "ms": "time", "s": "time",
              "B": "bytes", "KB": "bytes", "MB": "bytes", "GB": "bytes", "KiB": "bytes", "MiB": "bytes",
              "GiB": "bytes", "%": "share", "share": "share", "FLOP": "flops", "GFLOP": "flops",
              "TFLOP": "flops", "TFLOP/s": "flops", "GB/s": "bytes"}


def default_tolerance(answer) -> float:
    """The tightest relative tolerance accepting ``answer`` rounded to three significant
    figures (:meth:`Question.precision_text`); 0 for a whole number (exact)."""
    answer = _plain(answer)
    if isinstance(answer, bool) or isinstance(answer, int) or not answer:
        return 0
    a = abs(float(answer))
    half_unit = 0.5 * 10 ** (math.floor(math.log10(a)) - 2)
    return half_unit / a * (1 + 1e-9)


@dataclass
class Verdict:
    """The outcome of one check: ``correct`` None when no answer, or one outside the choices,
    was given (not a try). Displays as the answer form in a kernel (:mod:`kitlib.course.widgets`),
    else as text."""

    key: str
    correct: bool | None
    message: str
    #: For the answer form (not compared): the question, its exercises, the answer given.
    question: Any = field(default=None, repr=False, compare=False)
    exercises: Any = field(default=None, repr=False, compare=False)
    given: Any = field(default=None, repr=False, compare=False)
    #: Remakes a :meth:`Exercises.predicted` verdict (:func:`kitlib.course.widgets.prediction_bundle`).
    follow: Any = field(default=None, repr=False, compare=False)
    #: ``(keys, is_open, show)`` of a line held back (:func:`kitlib.course.widgets.held_bundle`).
    later: Any = field(default=None, repr=False, compare=False)

    def __str__(self):
        mark = {True: "✓", False: "✗", None: "…"}[self.correct]
        return f"{mark} {self.key}: {self.message}"

    def _repr_markdown_(self):
        mark = {True: "✅", False: "❌", None: "✏️"}[self.correct]
        return f"{mark} **{self.key}** — {self.message}"

    __repr__ = __str__

    def _repr_mimebundle_(self, include=None, exclude=None):
        """The answer form where a widget front end may exist, with the text beside it."""
        bundle = {"text/plain": str(self), "text/markdown": self._repr_markdown_()}
        if self.later is not None:
            from ..widgets import HELD_FORM_CLASS, held_bundle
            keys, is_open, show = self.later
            return held_bundle(self, keys, is_open, show, css=HELD_FORM_CLASS)
        if self.follow is not None:
            from ..widgets import prediction_bundle
            return prediction_bundle(self, bundle)
        if self.question is not None:
            from ..widgets import answer_form_bundle
            bundle = answer_form_bundle(self, bundle)
        return bundle


@dataclass
class Question:
    """One exercise.

    Attributes
    ----------
    key, prompt, answer, explain
        Name for :meth:`Exercises.check`; the question (with its unit); the expected answer,
        computed from the capture; why (shown after any attempt).
    tolerance : float, optional
        Relative, for numbers; default :func:`default_tolerance`. A question setting its own
        says why in ``tolerance_why`` (shown in the answer key).
    kind : str
        One of :data:`KINDS`.
    unit : str, optional
        ``"µs"``, ``"GiB"``, ``"%"``…; only then is a wrong number hinted a unit factor.
    where : str, optional
        Which table and column hold the answer's inputs; the first wrong try points there.
    normalise : callable, optional
        Makes a text answer comparable (default: lower-case, stripped).
    choices : list, optional
        The answers to choose from.
    traps : list of (answer, feedback), optional
        Known wrong answers and what each shows, checked before the generic hints
        (numbers match within ``tolerance``).
    accept, offered : callable, optional
        ``accept(given)`` decides a text answer instead of equality; ``offered(given)``
        whether it is one of ``choices`` (else: not a try).
    explain_when_wrong : bool
        Whether a wrong prediction gets the explanation at once; False where every wrong
        choice has a trap saying which way it is off.
    """

    key: str
    prompt: str
    answer: Any
    explain: str
    tolerance: float | None = None
    normalise: Callable | None = None
    choices: list | None = None
    traps: list = field(default_factory=list)
    accept: Callable | None = None
    offered: Callable | None = None
    kind: str | None = None
    unit: str | None = None
    where: str = ""
    tolerance_why: str = ""
    explain_when_wrong: bool = True
    wrong_tries: int = 0
    #: A ``predict`` question's first answer (``...`` until one is given).
    prediction: Any = ...
    #: The wrong tries before the first right answer (None until one is right).
    solved_after: int | None = None
    revealed: bool = False

    def outcome_open(self) -> bool:
        """Whether a ``predict`` question's outcome may be shown: predicted, or revealed."""
        return self.prediction is not ... or self.revealed

    def attempted(self) -> bool:
        """Whether answered at least once (a counted try), or revealed."""
        return self.wrong_tries > 0 or self.solved_after is not None or self.revealed

    def outcome_ready(self) -> bool:
        """What :meth:`Exercises.outcome` waits on: :meth:`outcome_open` (predict) or :meth:`attempted`."""
        return self.outcome_open() if self.kind == "predict" else self.attempted()

    def __post_init__(self):
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"question {self.key!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.tolerance is None:
            self.tolerance = default_tolerance(self.answer) if _is_number(self.answer) else 0

    def precision_text(self) -> str:
        """`` (3 significant figures)`` for a number judged at the default tolerance, else ``""``."""
        if _is_number(self.answer) and not isinstance(_plain(self.answer), int) and \
                self.tolerance == default_tolerance(self.answer) and self.tolerance:
            return " (3 significant figures)"
        return ""

    def choices_text(self) -> str:
        """`` (choose from: a, b, c)`` unless the prompt quotes every choice, else ``""``."""
        if not self.choices or all(f"'{c}'" in self.prompt or f'"{c}"' in self.prompt for c in self.choices):
            return ""
        return f" (choose from: {', '.join(map(str, self.choices))})"

    def is_offered(self, given) -> bool:
        """Whether ``given`` is one of the offered choices (always True without choices)."""
        if not self.choices or given is None or given is ...:
            return True
        if self.offered is not None:
            return bool(self.offered(given))
        if self.accept is not None and self.accept(given):
            return True
        if isinstance(self.answer, bool):
            return _as_bool(given) is not None
        norm = self.normalise or (lambda s: str(s).strip().lower())
        return any(norm(given) == norm(c) for c in self.choices)

    def judge(self, given) -> Verdict:
        if given is None or given is ...:
            return Verdict(self.key, None, "replace `None` with your answer and run the cell again. "
                                            f"Question: {self.prompt}{self.choices_text()}")
        # str() raises on an int of over 4300 digits: it answers no text, choice or yes/no
        huge_text = _beyond_float(given) and not _is_number(self.answer)
        if huge_text and not self.choices:
            return Verdict(self.key, False, f"{_shown(given, self.answer)} is not an answer to this "
                                            f"question. {self.prompt}")
        if huge_text or not self.is_offered(given):
            return Verdict(self.key, None, f"{_shown(given, self.answer)} is not one of the choices "
                                           f"({', '.join(map(str, self.choices))}); this does not count as a try.")
        if isinstance(self.answer, bool):
            b = _as_bool(given)
            if b is None:
                return Verdict(self.key, False, f"answer yes or no (True or False), not {given!r}. {self.prompt}")
            ok = b == self.answer
            hit = lambda t: isinstance(t, bool) and t == b      # noqa: E731
        elif _is_number(self.answer):
            # neither a yes/no (True would be 1.0) nor NaN/infinity (nan was "too low" and kept
            # as a prediction) is a number here: refused, not counted as a try, not kept
            if isinstance(_plain(given), bool):
                return Verdict(self.key, False, f"expected a number, got {_plain(given)!r}: that is a yes/no, "
                                                f"not a number. {self.prompt}")
            huge = False
            # a number typed with thousands separators, as the kit writes figures ("11,164")
            typed = given.strip().replace(",", "") if isinstance(given, str) and \
                _NUMBER_TEXT.fullmatch(given.strip()) else given
            try:
                g = float(typed)
            except OverflowError:       # an int beyond a float's range (10**400): a number, judged
                g, huge = (math.inf if given > 0 else -math.inf), True   # as farther than any float
            except (TypeError, ValueError):
                return Verdict(self.key, False, f"expected a number, got {_shown(given, self.answer)}. {self.prompt}")
            if not math.isfinite(g) and not huge:
                return Verdict(self.key, False, f"expected a number, got {_plain(given)!r}: not a finite number "
                                                f"(NaN or infinity: check the cell that computed it). {self.prompt}")
            tol = abs(self.answer) * self.tolerance if self.tolerance else 0
            ok = abs(g - self.answer) <= max(tol, 1e-12)
            if not ok:
                self._record(given)
                for trap, feedback in self.traps:
                    # at three significant figures or the answer's tolerance, the wider: 0.118 catches 0.1181
                    if _is_number(trap) and abs(g - trap) <= max(
                            abs(trap) * max(self.tolerance or 0, default_tolerance(trap)), 1e-12):
                        return self._wrong(given, feedback)
                kind = _UNIT_KIND.get(self.unit or "")
                for factor in _UNIT_FACTORS.get(kind, ()):
                    if self.answer and abs(g / factor - self.answer) <= max(tol, abs(self.answer) * 1e-3):
                        what = (f"{factor:.4g}: GB (10⁹ bytes) and GiB (2³⁰ bytes) differ by that factor"
                                if kind == "bytes" and factor not in (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9)
                                else f"{factor:g}")
                        return self._wrong(given, f"your number is off by a factor of {what}: check the "
                                                  f"unit the question asks for ({self.unit}).")
                return self._wrong(given, self._direction(g))
        else:
            norm = self.normalise or (lambda s: str(s).strip().lower())
            ok = self.accept(given) if self.accept is not None else norm(given) == norm(self.answer)
            hit = lambda t: isinstance(t, str) and norm(given) == norm(t)      # noqa: E731
        self._record(given)
        if ok:
            if self.solved_after is None:
                self.solved_after = self.wrong_tries
            return Verdict(self.key, True, f"right. {_capital(self.explain)}")
        return self._wrong(given, next((feedback for trap, feedback in self.traps if hit(trap)), ""))

    def _direction(self, g: float) -> str:
        """"too high", "too low", or for a float answer rounded to two significant figures
        (0.15 for 0.149) that it is right that far (one figure is not: 800 may be a guess)."""
        a = float(_plain(self.answer))
        if isinstance(_plain(self.answer), float) and a and math.isclose(g, float(f"{a:.2g}"), rel_tol=1e-9):
            return f"right to 2 significant figures: {'give 3' if self.precision_text() else 'give more'}"
        return "too high" if g > a else "too low"

    def trap_hit(self, verdict):
        """``(id, text)`` of the trap the wrong ``verdict`` quotes, else ``(None, None)``
        (:mod:`kitlib.course.classview`): a misconception's key and title, or
        ``<question key>.trap<n>`` (n from 1) and the feedback's first 160 characters."""
        if verdict.correct is not False:
            return None, None

        def tidy(text):       # as _wrong tidies a prediction's message
            return " ".join(str(text).split()).replace(". .", ".")
        message = tidy(verdict.message)
        for i, (_, feedback) in enumerate(self.traps, start=1):
            if feedback and tidy(_sentence(feedback)) in message:
                key = getattr(feedback, "key", "")
                if key:
                    return key, MISCONCEPTIONS[key][0]
                return f"{self.key}.trap{i}", str(feedback)[:160]
        return None, None

    def judge_silently(self, given) -> bool:
        """Whether ``given`` is right, without counting a try or recording a prediction."""
        tries, prediction, solved = self.wrong_tries, self.prediction, self.solved_after
        try:
            return bool(self.judge(given).correct)
        finally:
            self.wrong_tries, self.prediction, self.solved_after = tries, prediction, solved

    def _record(self, given):
        """Keep a ``predict`` question's first answer (later tries do not change it)."""
        if self.kind == "predict" and self.prediction is ...:
            self.prediction = given

    def _wrong(self, given, hint: str = "") -> Verdict:
        """A wrong answer: a direction (``hint``) and where to read first; the explanation from the
        second try, or at once for a prediction (unless ``explain_when_wrong=False``)."""
        self.wrong_tries += 1
        shown = _shown(given, self.answer)
        where = f" Read it from {self.where}." if self.where else ""
        if self.kind == "predict":
            explain = _capital(self.explain) if self.explain_when_wrong else ""
            return Verdict(self.key, False, f"your prediction, {shown}, is not what the recording shows. {_sentence(hint)}{where} "
                                            f"{explain}".strip().replace("  ", " ").replace(". .", "."))
        if self.wrong_tries < 2:
            return Verdict(self.key, False, f"not quite ({shown}). {_sentence(hint) or 'Look again.'}{where} "
                                            f"Retry (the next wrong try shows the answer; or call "
                                            f".reveal('{self.key}')).")
        return Verdict(self.key, False, f"not quite ({shown}). {_sentence(hint)} {_capital(self.explain)}"
                       .replace("  ", " "))


def _is_number(x) -> bool:
    """A number that is not a yes/no (numpy numbers included)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) or \
        (type(x).__module__ == "numpy" and hasattr(x, "item") and isinstance(x.item(), (int, float))
         and not isinstance(x.item(), bool))


def _plain(v):
    """A numpy scalar as the Python number it holds (``844.61``, not ``np.float64(844.61)``)."""
    return v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v


def _beyond_float(x) -> bool:
    """An int (not a yes/no) too large for a float (``10**400``): ``float()`` raises on it."""
    return isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 1024


def _shown(given, answer) -> str:
    """The learner's answer as written: ``yes``/``no`` for a yes/no question, a number (or
    number text) with thousands separators, an int beyond a float in 3 figures, text quoted."""
    if isinstance(answer, bool):
        b = _as_bool(given)
        if b is not None:
            return "yes" if b else "no"
    if _beyond_float(given):
        import decimal
        return format(decimal.Decimal(given), ".3g")
    given = _plain(given)
    if _is_number(given):
        return _number_text(given)
    if isinstance(given, str) and _NUMBER_TEXT.fullmatch(given.strip()):
        return _grouped(given.strip())
    return repr(given)


#: Text that is a plain number, with or without thousands separators (``10000``, ``-1,523.4``).
_NUMBER_TEXT = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?")


def _grouped(text: str) -> str:
    """A plain number's text with thousands separators, digits as written (``-1,523.40``)."""
    text = text.replace(",", "").lstrip("+")
    sign, text = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, dot, frac = text.partition(".")
    return f"{sign}{int(whole):,}{dot}{frac}"


def _number_text(v) -> str:
    """A number's ``repr`` with thousands separators (``11,164``, ``844.61``, ``1e-05``)."""
    text = repr(_plain(v))
    return _grouped(text) if _NUMBER_TEXT.fullmatch(text) else text


def _answer_shown(answer) -> str:
    """An answer as Reveal shows it: ``yes``/``no``; a float of over six significant digits
    to four (whole from 1000 up); numbers with thousands separators; other text quoted."""
    answer = _plain(answer)
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    if isinstance(answer, str):
        return _grouped(answer.strip()) if _NUMBER_TEXT.fullmatch(answer.strip()) else repr(answer)
    text = repr(answer)
    if not isinstance(answer, float) or not math.isfinite(answer) or not answer or \
            len(text.split("e")[0].lstrip("-").replace(".", "").lstrip("0")) <= 6:
        return _number_text(answer) if _is_number(answer) else text
    decimals = max(0, 3 - math.floor(math.log10(abs(answer))))
    return _grouped(f"{answer:.{decimals}f}")


#: One held-back outcome drawn at a time (ipykernel 7 runs a button on its own thread).
_DRAWING = threading.RLock()


def _flush_waits_for_drawing(ip) -> None:
    """Make the inline backend's ``flush_figures`` take :data:`_DRAWING` first (docs/DEVELOPING.md)."""
    events = getattr(ip, "events", None)
    for cb in list(getattr(events, "callbacks", {}).get("post_execute", [])):
        if getattr(cb, "__name__", "") == "flush_figures" and not hasattr(cb, "_kitlib_waits"):
            def flush(cb=cb):
                with _DRAWING:
                    return cb()
            flush.__name__, flush._kitlib_waits = "flush_figures", True
            events.unregister("post_execute", cb)
            events.register("post_execute", flush)


def _figures_now(plt) -> dict:
    """pyplot's open figures by number, without creating any (as ``plt.figure(n)`` may)."""
    from matplotlib._pylab_helpers import Gcf
    return {n: m.canvas.figure for n, m in list(Gcf.figs.items())} if plt is not None else {}


def _show_outcome(show, draw: bool = False):
    """Run ``show()`` and display what it returns (not None, nor matplotlib's); with ``draw``
    (from a form's button) also display and close the figures it opened."""
    import sys
    from IPython import get_ipython
    if draw and get_ipython() is not None:
        _flush_waits_for_drawing(get_ipython())
    with _DRAWING:
        plt = sys.modules.get("matplotlib.pyplot")
        # by identity: a figure number freed meanwhile is reused
        before = {id(f) for f in _figures_now(plt).values()}
        result = show()
        from IPython.display import display
        if result is not None and not type(result).__module__.startswith("matplotlib"):
            display(result)
        plt = sys.modules.get("matplotlib.pyplot")
        if not (draw and plt is not None):
            return
        from IPython import get_ipython
        from .. import labels
        ip = get_ipython()
        if ip is not None:
            labels.register_figure_formatter(ip)
        # each closed before it is shown, so nothing else shows or closes it meanwhile
        figures = [f for n, f in sorted(_figures_now(plt).items()) if id(f) not in before]
        drawn = getattr(result, "figure", result)          # a figure or axes returned
        if type(drawn).__name__ == "Figure" and all(f is not drawn for f in figures):
            figures.append(drawn)
        for fig in figures:
            plt.close(fig)
        for fig in figures:
            labels.stamp_figure(fig)
            display(fig)


#: A first word capitalised at a sentence's start: letters only (a trailing comma, colon or
#: semicolon aside), so code (``torch.profiler``, ``data_load:``, ``aten::add_``, ``resnet.py``)
#: and numbers stay as written.
_PLAIN_WORD = re.compile(r"[a-z][a-z'’-]*(?=[\s,;)]|:(?!:)|$)")
#: Lower-case names that stay so at a sentence's start (tools and packages).
_KEEP_LOWER = frozenset({"nsys", "ncu", "torchrun", "torch", "kitlib", "pandas", "numpy", "pip", "hta"})


def _capital(text: str) -> str:
    """``text`` with its first letter capitalised where its first word is a plain word
    (:data:`_PLAIN_WORD`, not one of :data:`_KEEP_LOWER`): what follows a full stop."""
    text = str(text).strip()
    m = _PLAIN_WORD.match(text)
    if m and m.group(0) not in _KEEP_LOWER:
        return text[0].upper() + text[1:]
    return text


def _sentence(hint: str) -> str:
    """``hint`` as a sentence: capitalised (:func:`_capital`) and ending with a full stop
    (``""`` stays empty)."""
    hint = _capital(hint)
    if not hint:
        return ""
    return hint if hint.endswith((".", "!", "?", ")")) else hint + "."


_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


def _as_bool(x):
    """True/False for a yes/no answer (``np.True_`` too); None otherwise (a typo is not a "no")."""
    x = _plain(x)
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) and x in (0, 1):
        return bool(x)
    if isinstance(x, str):
        w = x.strip().strip(".!").strip().lower()
        return True if w in _YES else False if w in _NO else None
    return None


#: What a learner did with a question, kept in step between a lesson's exercises built again.
_STATE_FIELDS = ("prediction", "wrong_tries", "solved_after", "revealed")
#: Per lesson (:func:`_lesson_of`): weak references to the exercises built in this kernel, and
#: the latest, kept alive.
_BUILT: dict = {}
_LATEST: dict = {}


def _shares_state() -> bool:
    """Whether this runs in a Jupyter kernel (one learner, so a lesson's questions built again
    share what was done; not a script, the tests or terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _lesson_of(title: str) -> str:
    """``"lesson 01"`` from "Lesson 01 — your turn" (or "… your prediction"); else the title."""
    m = re.match(r"\s*lesson\s+(\d+)", title or "", re.I)
    return f"lesson {m.group(1)}" if m else (title or "")


def _same_in(ex, q):
    """The question of ``ex`` that is ``q`` (:func:`_same_question`), else None."""
    return next((o for o in ex.questions if _same_question(o, q)), None)


def _copy_state(src, dst) -> None:
    """What the learner did with question ``src`` (:data:`_STATE_FIELDS`), onto ``dst``; None: nothing."""
    for name in _STATE_FIELDS if src is not None else ():
        setattr(dst, name, getattr(src, name))


def _same_question(a: "Question", b: "Question") -> bool:
    """Whether ``a`` and ``b`` have the same key, kind and answer."""
    if (a.key, a.kind) != (b.key, b.kind):
        return False
    try:
        return bool(_plain(a.answer) == _plain(b.answer))
    except Exception:
        return False


@dataclass
class Exercises:
    """A lesson's questions. ``show()`` lists them; ``check(key, answer)`` judges one.

    In a kernel, exercises built again for the same lesson take over what the learner did
    with each question and keep in step with the earlier ones from then on.
    """

    title: str
    questions: list[Question] = field(default_factory=list)
    #: Per key, what refreshes the lines of :meth:`predicted` on the page after a check.
    followers: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not _shares_state():
            return
        import weakref
        lesson = _lesson_of(self.title)
        earlier = _LATEST.get(lesson)
        if earlier is not None:
            for q in self.questions:
                _copy_state(_same_in(earlier, q), q)
        built = [r for r in _BUILT.get(lesson, []) if r() is not None]
        _BUILT[lesson] = built + [weakref.ref(self)]
        _LATEST[lesson] = self

    def _siblings(self, key: str) -> list:
        """``(exercises, question)`` of the other exercises of this lesson holding question ``key``."""
        if not _shares_state():
            return []
        q = self[key]
        found = []
        for ref in _BUILT.get(_lesson_of(self.title), []):
            other = ref()
            same = _same_in(other, q) if other is not None and other is not self else None
            if same is not None:
                found.append((other, same))
        return found

    def _after_change(self, key: str):
        """Bring question ``key``'s copies in step with it, then run every one's followers."""
        q = self[key]
        siblings = self._siblings(key)
        for _, other in siblings:
            _copy_state(q, other)
        for ex in [self] + [e for e, _ in siblings]:
            for follow in list(ex.followers.get(key, ())):
                follow()

    def __getitem__(self, key) -> Question:
        for q in self.questions:
            if q.key == key:
                return q
        raise KeyError(f"no exercise {key!r}; the keys are: {', '.join(q.key for q in self.questions)}")

    def show(self) -> str:
        """The questions as text, ``  - key [kind]: prompt`` with choices, wrapped (:func:`kitlib.units.wrapped`)."""
        return "\n".join([f"{self.title}:"] + [self._entry(q) for q in self.questions])

    @staticmethod
    def _entry(q) -> str:
        from ...units import wrapped
        return wrapped(f"  - {q.key} [{q.kind or 'recall'}]: {q.prompt}{q.precision_text()}{q.choices_text()}")

    def check(self, key: str, answer) -> Verdict:
        """Judge ``answer`` to question ``key`` and explain it. Raises KeyError: unknown key
        (the message lists the known ones)."""
        q = self[key]
        v = q.judge(answer)
        v.question, v.exercises = q, self
        # the form's box shows a huge int as the verdict does (str() raises past 4300 digits)
        v.given = _shown(answer, None) if _beyond_float(answer) else answer
        self._after_change(key)
        from .. import classview
        classview.send(self, q, v)
        return v

    def reveal(self, key: str) -> Verdict:
        """The answer to question ``key`` (:func:`_answer_shown`) and why; right if already solved."""
        q = self[key]
        q.revealed = True
        v = Verdict(key, True if q.solved_after is not None else None,
                    f"the answer is {_answer_shown(q.answer)}: {q.explain}")
        self._after_change(key)
        return v

    def predicted(self, key: str) -> Verdict:
        """A ``predict`` question's first answer beside what the recording shows; while none
        was made, how to make one (in a kernel the line follows the question's checks).

        Raises KeyError (unknown key) or ValueError (not a ``predict`` question)."""
        q = self[key]
        if q.kind != "predict":
            raise ValueError(f"{key!r} is a {q.kind} question, not a prediction")
        follow = lambda: self.predicted(key)     # noqa: E731
        if q.prediction is ...:
            return Verdict(key, None, f"your prediction is still open: make it in the question's form above "
                                      f"(or with ex.check({key!r}, answer)), then run this cell again to see it "
                                      f"beside the recording. ex.reveal({key!r}) gives the answer without one.",
                           exercises=self, follow=follow)
        ok = q.judge_silently(q.prediction)
        return Verdict(key, ok, f"you predicted {_shown(q.prediction, q.answer)}; the recording says "
                                f"{_answer_shown(q.answer)}. "
                                + ("Your model of it held." if ok else f"What you missed: {q.explain}"),
                       exercises=self, follow=follow)

    def outcome(self, key, show, asked: str = "above"):
        """Run ``show()`` (what it returns displayed, unless None) once question ``key`` (or
        every key of a tuple) is answered or revealed (:meth:`Question.outcome_ready`); until
        then a line saying how, where the question is ``asked``, which in a kernel gives way
        to the outcome in place. Returns None; raises KeyError for an unknown key."""
        keys = (key,) if isinstance(key, str) else tuple(key)
        questions = [self[k] for k in keys]
        is_open = lambda: all(q.outcome_ready() for q in questions)     # noqa: E731
        if is_open():
            _show_outcome(show)
            return None
        first = next(q for q in questions if not q.outcome_ready())
        line = Verdict(first.key, None, self._held_back_text(questions, asked), exercises=self)
        from ..widgets import show_outcome_later
        from .. import labels
        note = labels.sources_note()     # this cell's, for a redraw outside it

        def later():
            with labels.fixed_note(note):
                _show_outcome(show, draw=True)
        show_outcome_later(line, keys, is_open, later)
        return None

    @staticmethod
    def _held_back_text(questions, asked: str = "above") -> str:
        """The line :meth:`outcome` shows while ``questions`` wait: every one still open."""
        waiting = [q for q in questions if not q.outcome_ready()]
        predict = [q.key for q in waiting if q.kind == "predict"]
        answer = [q.key for q in waiting if q.kind != "predict"]
        if len(waiting) == 1 and predict:
            k = predict[0]
            return (f"the outcome is held back until you predict: answer the question {asked} in "
                    f"its form (or with ex.check({k!r}, answer)), or call ex.reveal({k!r}); it then shows here.")
        said = " and ".join(part for part in (f"predict {', '.join(predict)}" if predict else "",
                                              f"answer {', '.join(answer)}" if answer else "") if part)
        return (f"the outcome is held back until you {said}: each in its form (or with "
                f"ex.check(key, answer)), or call ex.reveal(key); it then shows here.")

    def scorecard(self, group=None):
        """How each question went: a DataFrame indexed by key, or by ``group(key)`` when given,
        of counts ``questions``, ``right_first_try``, ``right`` (a reveal is not), ``wrong_tries``."""
        import pandas as pd
        rows = [{"key": q.key, "group": group(q.key) if group else q.key, "questions": 1,
                 "right_first_try": int(q.solved_after == 0), "right": int(q.solved_after is not None),
                 "wrong_tries": q.wrong_tries} for q in self.questions]
        table = pd.DataFrame(rows, columns=["key", "group", "questions", "right_first_try", "right", "wrong_tries"])
        if group is None:
            return table.drop(columns="group").set_index("key")
        return table.drop(columns="key").groupby("group", sort=False).sum()

    def form(self, key: str):
        """Question ``key`` as an answer form (ipywidgets). Raises KeyError or ImportError."""
        from ..widgets import AnswerForm
        return AnswerForm(self[key], self)

    def _repr_markdown_(self):
        return "\n".join([f"**{self.title}**", ""] + [f"- `{q.key}`: {q.prompt}" for q in self.questions])


def __getattr__(name):
    """``exercises.lessonNN(capture)`` builds lesson NN's questions (from ``exercises/lNN.py``)."""
    import importlib
    if name.startswith("lesson") and name[6:].isdigit():
        try:
            mod = importlib.import_module(f".l{name[6:]}", __name__)
        except ModuleNotFoundError:
            raise AttributeError(f"no exercises for {name}") from None
        return mod.questions
    raise AttributeError(name)

