""""Your turn" exercises: questions whose answers come from the capture in hand.

A lesson builds its questions from the capture it shows (live or recorded), so
the expected answer is always computed, never typed in, and the explanation
quotes the learner's own figures. ``check`` says right or wrong and why.

Example
-------
>>> ex = exercises.lesson02(capture)        # doctest: +SKIP
>>> ex.check("launch_count", 3)             # doctest: +SKIP
✓ launch_count: right. The operator made 3 launches ...
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
    """Feedback for a classic misconception: the text, with the misconception's ``key``.

    Made with :func:`misconception`; a question's ``traps`` hold it like any other
    feedback, and :data:`MISCONCEPTIONS` lists the keys.
    """

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
    """A trap ``(answer, feedback)`` for the classic misconception ``key``.

    Parameters
    ----------
    key : str
        One of :data:`MISCONCEPTIONS`.
    answer
        The answer a learner holding the misconception gives.
    detail : str
        A sentence about this question's own figures, added to the general feedback.

    Raises
    ------
    KeyError
        An unknown misconception (the message lists the known ones).

    Examples
    --------
    >>> q = Question("n", "How many launches?", 3, "three", kind="compute",
    ...              traps=[misconception("one_op_one_kernel", 1)])
    >>> "one operator = one kernel" in q.judge(1).message
    True
    """
    if key not in MISCONCEPTIONS:
        raise KeyError(f"no misconception {key!r}; known: {', '.join(MISCONCEPTIONS)}")
    title, text = MISCONCEPTIONS[key]
    m = Misconception(f"a classic misconception, \"{title}\": {text} {detail}".strip())
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
    """The tightest relative tolerance that accepts ``answer`` correctly rounded to three
    significant figures (the precision :meth:`Question.precision_text` asks for); 0 for a
    whole number, which must be exact.

    Examples
    --------
    >>> default_tolerance(3)
    0
    >>> round(default_tolerance(844.61), 6)    # 845 is off by 0.39 µs; 0.5 µs is allowed
    0.000592
    """
    answer = _plain(answer)             # a numpy integer is a whole number too
    if isinstance(answer, bool) or isinstance(answer, int) or not answer:
        return 0
    a = abs(float(answer))
    half_unit = 0.5 * 10 ** (math.floor(math.log10(a)) - 2)
    return half_unit / a * (1 + 1e-9)


@dataclass
class Verdict:
    """The outcome of one check: ``correct`` is None when no answer was given, or when the
    answer was not one of the question's choices (neither counts as a try).

    In a Jupyter kernel a verdict displays as the question's answer form
    (:mod:`kitlib.course.widgets`: a box or choices, Check and Reveal buttons, this
    verdict below); everywhere else, and in front ends without widgets, as the text.
    """

    key: str
    correct: bool | None
    message: str
    #: The question judged (and its lesson's exercises), for the answer form; not compared.
    question: Any = field(default=None, repr=False, compare=False)
    exercises: Any = field(default=None, repr=False, compare=False)
    given: Any = field(default=None, repr=False, compare=False)
    #: For :meth:`Exercises.predicted`: makes this verdict again, so that its line in a
    #: notebook follows the question (:func:`kitlib.course.widgets.prediction_bundle`).
    follow: Any = field(default=None, repr=False, compare=False)
    #: For a question held back until others are tried: ``(keys, is_open, show)``; in a
    #: notebook the verdict's line then gives way to ``show()`` in place, once ``is_open()``
    #: after a check or reveal of one of ``keys`` (:func:`kitlib.course.widgets.held_bundle`).
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
    key : str
        Short name used with :meth:`Exercises.check`.
    prompt : str
        The question, with the unit the answer is expected in.
    answer : Any
        The expected answer, computed from the capture.
    explain : str
        Why that is the answer (shown after any attempt).
    tolerance : float, optional
        For numbers: relative tolerance (0.02 = within 2 %). Default: the tightest that accepts
        the answer rounded to three significant figures (:func:`default_tolerance`), exact for a
        whole number. A question that sets its own says why in ``tolerance_why``.
    kind : str
        What the question asks of the learner: one of :data:`KINDS` (``recall``, ``compute``,
        ``predict``, ``transfer``).
    unit : str, optional
        The answer's unit (``"µs"``, ``"GiB"``, ``"%"``…). Only a question with a unit hints at
        a unit factor (×1000, GB for GiB) on a wrong number.
    where : str, optional
        Which table and column (or raw rows) hold what the answer is worked out from; the first
        wrong try points there.
    tolerance_why : str, optional
        Why the tolerance is what it is (shown in the answer key).
    normalise : callable, optional
        Turns a text answer into a comparable form (default: lower-case, stripped).
    choices : list, optional
        The answers to choose from, shown with the prompt.
    traps : list of (answer, feedback), optional
        Known wrong answers and what each one shows the learner got wrong (the B300
        figure typed for an H200 question, MACs for FLOPs, the sum for the union…),
        checked before the generic hints. Numbers match within ``tolerance``.
    accept : callable, optional
        ``accept(given) -> bool`` decides a text answer instead of equality with
        ``answer`` (for questions with more than one right answer).
    offered : callable, optional
        ``offered(given) -> bool`` says whether an answer is one of ``choices`` (default:
        its normalised form equals a choice's). An answer outside the choices is told so
        and does not count as a wrong try.
    explain_when_wrong : bool
        Whether a wrong prediction (``kind="predict"``) is told the explanation at once
        (default). False where the explanation opens with the answer and every wrong choice
        has a trap that says which way it is off and why: the wrong try then gets that
        direction and where to read, not what Reveal says; the explanation follows in
        :meth:`Exercises.predicted` and the outcomes the prediction opens.
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
    #: The wrong tries before the first right answer (None until one is right); see
    #: :meth:`Exercises.scorecard`.
    solved_after: int | None = None
    #: Whether :meth:`Exercises.reveal` has shown the answer (opens :meth:`Exercises.outcome`).
    revealed: bool = False

    def outcome_open(self) -> bool:
        """Whether a ``predict`` question's outcome may be shown: predicted, or revealed."""
        return self.prediction is not ... or self.revealed

    def attempted(self) -> bool:
        """Whether a question of any other kind may let an outcome show: answered at least
        once (a wrong try counted, or a right answer), or revealed."""
        return self.wrong_tries > 0 or self.solved_after is not None or self.revealed

    def outcome_ready(self) -> bool:
        """What :meth:`Exercises.outcome` waits on: :meth:`outcome_open` for a ``predict``
        question, :meth:`attempted` for the others."""
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
        """`` (choose from: a, b, c)`` for a question with choices whose prompt does not already
        quote them all, else ``""``."""
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
        if _beyond_float(given) and not _is_number(self.answer):
            # text, choices and yes/no compare what is written, and Python will not write
            # an int of more than 4300 digits (str() raises): such a number answers none
            if self.choices:
                return Verdict(self.key, None, f"{_shown(given, self.answer)} is not one of the choices "
                                               f"({', '.join(map(str, self.choices))}); this does not "
                                               "count as a try.")
            return Verdict(self.key, False, f"{_shown(given, self.answer)} is not an answer to this "
                                            f"question. {self.prompt}")
        if not self.is_offered(given):
            return Verdict(self.key, None, f"{_shown(given, self.answer)} is not one of the choices "
                                           f"({', '.join(map(str, self.choices))}); this does not count as a try.")
        if isinstance(self.answer, bool):
            b = _as_bool(given)
            if b is None:
                return Verdict(self.key, False, f"answer yes or no (True or False), not {given!r}. {self.prompt}")
            ok = b == self.answer
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
                    # a trap matches at the precision the learner is asked for (three significant
                    # figures), or at the answer's tolerance where that is wider: a trap kept
                    # rounded (0.118) still catches the same slip typed more precisely (0.1181)
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
            if not ok:
                for trap, feedback in self.traps:
                    if isinstance(trap, str) and norm(given) == norm(trap):
                        self._record(given)
                        return self._wrong(given, feedback)
        if not ok and isinstance(self.answer, bool):
            for trap, feedback in self.traps:
                if isinstance(trap, bool) and trap == _as_bool(given):
                    self._record(given)
                    return self._wrong(given, feedback)
        self._record(given)
        if ok:
            if self.solved_after is None:
                self.solved_after = self.wrong_tries
            return Verdict(self.key, True, f"right. {self.explain}")
        return self._wrong(given)

    def _direction(self, g: float) -> str:
        """Which way a wrong number is off: "too high", "too low", or, for a float answer
        rounded to two significant figures (0.15 for 0.149), that it is right that far and to
        give more. What counts as right is not changed. (One figure is not singled out: 800
        for 844.61 is as likely a low guess as a rounding.)"""
        a = float(_plain(self.answer))
        if isinstance(_plain(self.answer), float) and a and math.isclose(g, float(f"{a:.2g}"), rel_tol=1e-9):
            return f"right to 2 significant figures: {'give 3' if self.precision_text() else 'give more'}"
        return "too high" if g > a else "too low"

    def trap_hit(self, verdict):
        """``(trap id, trap text)`` of the trap whose feedback the wrong ``verdict`` gave, else
        ``(None, None)`` (for the instructor's class view, :mod:`kitlib.course.classview`). The
        id: a classic misconception's key (``one_op_one_kernel``), or, for the question's own
        trap, ``<question key>.trap<n>`` (n counts from 1 in ``traps``: stable while the
        lesson's code keeps its order); the text: the misconception's title, or the trap's
        feedback (first 160 characters)."""
        if verdict.correct is not False:
            return None, None

        def tidy(text):       # as a predict question's verdict tidies its message (spaces, ". .")
            return " ".join(str(text).split()).replace(". .", ".")
        message = tidy(verdict.message)
        for i, (_, feedback) in enumerate(self.traps, start=1):
            if feedback and tidy(_sentence(feedback)) in message:     # the verdict quotes it as a sentence
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
        """A wrong answer: a direction first (a trap's own feedback, too high or too low, a unit
        factor, where to read); the explanation from the second try on, or at once for a
        ``predict`` question (its first answer is kept, so a second try wins nothing) unless
        it sets ``explain_when_wrong=False``."""
        self.wrong_tries += 1
        shown = _shown(given, self.answer)
        where = f" Read it from {self.where}." if self.where else ""
        if self.kind == "predict":
            explain = self.explain if self.explain_when_wrong else ""
            return Verdict(self.key, False, f"your prediction, {shown}, is not what the recording shows. {_sentence(hint)}{where} "
                                            f"{explain}".strip().replace("  ", " ").replace(". .", "."))
        if self.wrong_tries < 2:
            return Verdict(self.key, False, f"not quite ({shown}). {_sentence(hint) or 'Look again.'}{where} "
                                            f"Retry (the next wrong try shows the answer; or call "
                                            f".reveal('{self.key}')).")
        return Verdict(self.key, False, f"not quite ({shown}). {_sentence(hint)} {self.explain}".replace("  ", " "))


def _is_number(x) -> bool:
    """A number that is not a yes/no (numpy numbers included)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) or \
        (type(x).__module__ == "numpy" and hasattr(x, "item") and isinstance(x.item(), (int, float))
         and not isinstance(x.item(), bool))


def _plain(v):
    """A numpy scalar as the Python number it holds (``844.61``, not ``np.float64(844.61)``)."""
    return v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v


def _beyond_float(x) -> bool:
    """An int (not a yes/no) too large for a float (``10**400``): ``float()`` raises on it,
    and from 4300 digits ``str()`` does too."""
    return isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 1024


def _shown(given, answer) -> str:
    """The learner's answer as they would write it: ``yes``/``no`` for a yes/no question;
    a number as a number, with thousands separators as the kit writes figures (``1,000``,
    also for a choice typed as text, ``"1000"``); an int beyond a float's range in three
    significant figures (``1.00e+400``); other text quoted.

    Examples
    --------
    >>> _shown(10**400, 3.5), _shown(-10**5000, 3.5), _shown(1, True)
    ('1.00e+400', '-1.00e+5000', 'yes')
    >>> _shown(10000, "100"), _shown("1000", "100"), _shown(-2449.6, 3.5), _shown("slower", "faster")
    ('10,000', '1,000', '-2,449.6', "'slower'")
    """
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


#: Text that is a plain number, written with or without thousands separators (``10000``,
#: ``-1,523.4``): shown and judged as the number it is.
_NUMBER_TEXT = re.compile(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?")


def _grouped(text: str) -> str:
    """A plain decimal number's text (``-1523.40``, ``10000``) with thousands separators in
    its whole part, its digits otherwise as written (``-1,523.40``, ``10,000``)."""
    text = text.replace(",", "").lstrip("+")
    sign, text = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, dot, frac = text.partition(".")
    return f"{sign}{int(whole):,}{dot}{frac}"


def _number_text(v) -> str:
    """A number as the kit writes figures: its shortest exact form (``repr``) with thousands
    separators (``11,164``, ``844.61``, ``1e-05``, ``nan`` as written)."""
    text = repr(_plain(v))
    return _grouped(text) if _NUMBER_TEXT.fullmatch(text) else text


def _answer_shown(answer) -> str:
    """A question's answer as Reveal and ``predicted`` show it: ``yes``/``no``; a float with
    more than six significant digits (a computed ``11164.247248076219``) to four, or whole
    from 1000 up (``11,164``), as the explanations round it; a number (or a choice that is a
    number, ``"10000"``) with thousands separators; other text quoted.

    Examples
    --------
    >>> _answer_shown(11164.247248076219), _answer_shown(0.32387271348941254), _answer_shown(844.61)
    ('11,164', '0.3239', '844.61')
    >>> _answer_shown("10000"), _answer_shown(28_493_742_080), _answer_shown("forward")
    ('10,000', '28,493,742,080', "'forward'")
    """
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


#: One held-back outcome drawn at a time: a form's button may run on a thread of its own
#: (ipykernel 7), and pyplot's current figure is shared by all of them.
_DRAWING = threading.RLock()


def _flush_waits_for_drawing(ip) -> None:
    """Make the inline backend's ``flush_figures`` wait while an outcome is drawn.

    ipykernel 7 handles a widget's message on a thread of its own, and ``comm`` fires
    ``post_execute`` after each one: ``flush_figures`` there closed every open figure, a
    picture an outcome was drawing on another thread included, so it never showed (lesson 12's
    step budgets, on a busy machine). Wrapped, it takes :data:`_DRAWING` first."""
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
    """pyplot's open figures by number, read without creating any (``plt.figure(n)`` makes a
    new, empty figure where ``n`` was closed meanwhile)."""
    from matplotlib._pylab_helpers import Gcf
    return {n: m.canvas.figure for n, m in list(Gcf.figs.items())} if plt is not None else {}


def _show_outcome(show, draw: bool = False):
    """Run ``show()``; display what it returns (unless None, or matplotlib's figure or axes,
    which pyplot shows). With ``draw``, outside a cell's run (a form's button), display the figures
    ``show`` opened too, as the cell's end would, and close them."""
    import sys
    from IPython import get_ipython
    if draw and get_ipython() is not None:
        _flush_waits_for_drawing(get_ipython())
    with _DRAWING:
        plt = sys.modules.get("matplotlib.pyplot")
        # the figures open before, by identity: a number freed meanwhile is given to the next
        # new figure (lesson 12's and 13's pictures, drawn from a form, were taken for old ones)
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
        if ip is not None:        # as before the inline backend shows a cell's figures:
            labels.register_figure_formatter(ip)      # the kit's PNG (narrowed, its text size noted)
        # the figures show() drew, each leaving pyplot before it is shown, so that nothing else
        # shows or closes it meanwhile (new learners saw blank ones after a form's answer)
        figures = [f for n, f in sorted(_figures_now(plt).items()) if id(f) not in before]
        drawn = getattr(result, "figure", result)          # a figure or axes returned
        if type(drawn).__name__ == "Figure" and all(f is not drawn for f in figures):
            figures.append(drawn)
        for fig in figures:
            plt.close(fig)
        for fig in figures:
            labels.stamp_figure(fig)    # and the note under it
            display(fig)


def _sentence(hint: str) -> str:
    """``hint`` as a sentence: capitalised and ending with a full stop (``""`` stays empty)."""
    hint = str(hint).strip()
    if not hint:
        return ""
    hint = hint[0].upper() + hint[1:]
    return hint if hint.endswith((".", "!", "?", ")")) else hint + "."


_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


def _as_bool(x):
    """True/False for a yes/no answer (numpy's and pandas' ``np.True_`` too); None when it
    is neither (so a typo is not a "no")."""
    x = _plain(x)
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) and x in (0, 1):
        return bool(x)
    if isinstance(x, str):
        w = x.strip().strip(".!").strip().lower()
        return True if w in _YES else False if w in _NO else None
    return None


#: What a learner did with a question: kept in step between the questions of one lesson built
#: again in the same kernel (:meth:`Exercises._siblings`).
_STATE_FIELDS = ("prediction", "wrong_tries", "solved_after", "revealed")

#: The exercises built in this kernel, per lesson (:func:`_lesson_of`; weak references, oldest
#: first): a lesson builds ``ex`` again in its "Your turn" cell, below its predictions.
_BUILT: dict = {}
#: The latest of them per lesson, kept alive: what the learner did outlives an ``ex`` that
#: nothing refers to any more (a form, a held-back outcome or the name ``ex`` keeps the others).
_LATEST: dict = {}


def _shares_state() -> bool:
    """Whether a lesson's questions built again share what the learner did with them: in a
    Jupyter kernel, where one learner works through one lesson at a time; not in a plain
    process (a script, the tests, the answer key), which may build the same lesson's
    questions for several learners, each set on its own."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _lesson_of(title: str) -> str:
    """The lesson a set of exercises belongs to, from its title ("Lesson 01 — your turn" and
    "Lesson 01 — your prediction" are lesson 01's, as the class view reads it); the title
    itself where it names no lesson."""
    m = re.match(r"\s*lesson\s+(\d+)", title or "", re.I)
    return f"lesson {m.group(1)}" if m else (title or "")


def _same_question(a: "Question", b: "Question") -> bool:
    """Whether ``a`` and ``b`` are the same question: key, kind and answer (a lesson built on
    another capture asks the same key with another answer)."""
    if (a.key, a.kind) != (b.key, b.kind):
        return False
    try:
        return bool(_plain(a.answer) == _plain(b.answer))
    except Exception:          # an answer that does not compare: not known to be the same
        return False


@dataclass
class Exercises:
    """A lesson's questions. ``show()`` lists them; ``check(key, answer)`` judges one.

    In a Jupyter kernel, exercises built again for the same lesson (a lesson's "Your turn"
    cell builds ``ex`` again, below its predictions) take over what the learner already did
    with each question (its prediction, tries and reveal), and from then on the two sets keep
    in step: a check or reveal on either updates both, and opens the lines and outcomes that
    either one's cells hold back (:meth:`predicted`, :meth:`outcome`).
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
        earlier = _LATEST.get(lesson)       # the latest: all of them are kept in step
        if earlier is not None:
            for q in self.questions:
                old = next((o for o in earlier.questions if _same_question(o, q)), None)
                if old is not None:
                    for name in _STATE_FIELDS:
                        setattr(q, name, getattr(old, name))
        built = [r for r in _BUILT.get(lesson, []) if r() is not None]
        _BUILT[lesson] = built + [weakref.ref(self)]
        _LATEST[lesson] = self

    def _siblings(self, key: str) -> list:
        """The other exercises of this lesson built in this kernel that hold question ``key``
        (the same question: :func:`_same_question`), as ``(exercises, question)``."""
        if not _shares_state():
            return []
        q = self[key]
        found = []
        for ref in _BUILT.get(_lesson_of(self.title), []):      # the latest among them (_LATEST)
            other = ref()
            if other is None or other is self:
                continue
            same = next((o for o in other.questions if _same_question(o, q)), None)
            if same is not None:
                found.append((other, same))
        return found

    def _after_change(self, key: str):
        """Bring question ``key``'s copies in step with it, then redraw what follows it in
        every one of them (the lines of :meth:`predicted`, the outcomes held back)."""
        q = self[key]
        siblings = self._siblings(key)
        for _, other in siblings:
            for name in _STATE_FIELDS:
                setattr(other, name, getattr(q, name))
        for ex in [self] + [e for e, _ in siblings]:
            for follow in list(ex.followers.get(key, ())):
                follow()

    def __getitem__(self, key) -> Question:
        for q in self.questions:
            if q.key == key:
                return q
        raise KeyError(f"no exercise {key!r}; the keys are: {', '.join(q.key for q in self.questions)}")

    def show(self) -> str:
        """The questions as text, one entry each (``  - key [kind]: prompt``) with their
        choices (listed once), wrapped at spaces to 95 characters, as a notebook's output
        shows a line whole at a laptop's width (JupyterLab breaks a longer one mid-word)."""
        return "\n".join([f"{self.title}:"] + [self._entry(q) for q in self.questions])

    @staticmethod
    def _entry(q) -> str:
        """One question as :meth:`show` lists it, wrapped (:func:`kitlib.units.wrapped`)."""
        from ...units import wrapped
        return wrapped(f"  - {q.key} [{q.kind or 'recall'}]: {q.prompt}{q.precision_text()}{q.choices_text()}")

    def check(self, key: str, answer) -> Verdict:
        """Judge ``answer`` to question ``key`` and explain it.

        In a notebook the verdict displays as the question's answer form (see
        :class:`Verdict`); in a script it prints as text.

        Raises
        ------
        KeyError
            Unknown key (the message lists the known ones).
        """
        q = self[key]
        v = q.judge(answer)
        # the answer form writes what was given in its box: an int beyond a float's range as
        # the verdict shows it (Python writes no int of more than 4300 digits)
        v.question, v.exercises = q, self
        v.given = _shown(answer, None) if _beyond_float(answer) else answer
        self._after_change(key)      # the lines of `predicted` and the outcomes shown for this key
        from .. import classview
        classview.send(self, q, v)      # to the instructor's class view, under a hub that has it on
        return v

    def reveal(self, key: str) -> Verdict:
        """The answer to question ``key`` and why, without an attempt (marked right when the
        question was already answered right: a form keeps its ✅). The answer is rounded as
        the explanation rounds it (:func:`_answer_shown`)."""
        q = self[key]
        q.revealed = True
        v = Verdict(key, True if q.solved_after is not None else None,
                    f"the answer is {_answer_shown(q.answer)}: {q.explain}")
        self._after_change(key)      # an outcome held back for this key opens
        return v

    def predicted(self, key: str) -> Verdict:
        """A ``predict`` question's first answer beside what the recording shows, for the cell
        after the outcome.

        While no prediction has been made (a lesson run with Run All), it says so and how to
        make one, without the answer: running the cell again after predicting shows the
        comparison, and in JupyterLab the line updates by itself once the question is
        answered (in its form or with ``ex.check``).

        Raises
        ------
        KeyError
            Unknown key.
        ValueError
            ``key`` is not a ``predict`` question.
        """
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
        """Show what answers a question (a table, a print, a figure) only once the learner
        has answered it, in the question's form or with ``ex.check``, or has called
        ``ex.reveal(key)``: for the cells between a prediction and :meth:`predicted`, or for
        a summary that would give the answers of other questions away. A ``predict``
        question opens once predicted (its first answer, right or wrong) or revealed; a
        question of any other kind once it has been checked at least once (a wrong try
        counted, or a right answer) or revealed.

        ``key`` is a question's key, or a tuple of keys where one outcome answers several
        questions (it opens once each is answered or revealed). ``show()`` shows the
        outcome: what it prints, displays or draws is shown, and what it returns, unless
        None, is displayed as a cell's last value would be. While a prediction is open (a
        lesson run with Run All) the cell shows one line instead, saying how to make it, and
        nothing of the answer. In JupyterLab that line gives way to the outcome, in place,
        as soon as the question is answered or revealed (the follow-up that updates
        :meth:`predicted`'s line); running the cell again then shows the outcome directly.
        Outside a widget front end (a script, nbclient) the line is printed, and the
        outcome shown once the predictions exist.

        ``asked`` says where the question is, for that line (``"above"``; a cell that holds
        back what would answer a question further down says where).

        Returns
        -------
        None

        Raises
        ------
        KeyError
            Unknown key.
        """
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
        note = labels.sources_note()     # the recordings this cell draws on, for the notes under them

        def later():
            with labels.fixed_note(note):
                _show_outcome(show, draw=True)
        show_outcome_later(line, keys, is_open, later)
        return None

    @staticmethod
    def _held_back_text(questions, asked: str = "above") -> str:
        """The line :meth:`outcome` shows while ``questions`` are not all answered: it names
        every one still open (the predictions, then the others), not only the first.

        Examples
        --------
        >>> ex = Exercises("t", [Question("p", "Predict?", 3, "three", kind="predict"),
        ...                      Question("c", "How many?", 4, "four", kind="compute"),
        ...                      Question("d", "How many more?", 5, "five", kind="compute")])
        >>> print(ex._held_back_text(ex.questions))       # doctest: +NORMALIZE_WHITESPACE
        the outcome is held back until you predict p and answer c, d: each in its form (or with
        ex.check(key, answer)), or call ex.reveal(key); it then shows here.
        """
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
        """How each question went so far: one row per question, or per group of questions.

        Parameters
        ----------
        group : callable, optional
            ``group(key) -> str`` names the group a question belongs to (the clinic groups a
            case's questions, ``"case_a_cause"`` → ``"case_a"``); without it, one row per
            question.

        Returns
        -------
        DataFrame indexed by question key (or group)
            ``questions`` (count), ``right_first_try`` (right with no wrong try before),
            ``right`` (right at some try), ``wrong_tries`` (all wrong tries so far).
            Revealed answers do not count as right.

        Examples
        --------
        >>> ex = Exercises("t", [Question("a_n", "How many?", 3, "three", kind="compute"),
        ...                      Question("a_m", "How many more?", 4, "four", kind="compute")])
        >>> _ = ex.check("a_n", 3); _ = ex.check("a_m", 5); _ = ex.check("a_m", 4)
        >>> ex.scorecard(group=lambda k: k.split("_")[0])
               questions  right_first_try  right  wrong_tries
        group
        a              2                1      2            1
        """
        import pandas as pd
        rows = [{"key": q.key, "group": group(q.key) if group else q.key, "questions": 1,
                 "right_first_try": int(q.solved_after == 0), "right": int(q.solved_after is not None),
                 "wrong_tries": q.wrong_tries} for q in self.questions]
        table = pd.DataFrame(rows, columns=["key", "group", "questions", "right_first_try", "right", "wrong_tries"])
        if group is None:
            return table.drop(columns="group").set_index("key")
        return table.drop(columns="key").groupby("group", sort=False).sum()

    def form(self, key: str):
        """Question ``key`` as an answer form (ipywidgets), whatever the front end.

        Raises
        ------
        KeyError
            Unknown key.
        ImportError
            ipywidgets is not installed.
        """
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

