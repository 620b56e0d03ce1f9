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

from dataclasses import dataclass, field
from typing import Any, Callable


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
    tolerance : float
        For numbers: relative tolerance (0.02 = within 2 %).
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
    """

    key: str
    prompt: str
    answer: Any
    explain: str
    tolerance: float = 0.02
    normalise: Callable | None = None
    choices: list | None = None
    traps: list = field(default_factory=list)
    accept: Callable | None = None
    offered: Callable | None = None
    wrong_tries: int = 0

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
        if not self.is_offered(given):
            return Verdict(self.key, None, f"{given!r} is not one of the choices "
                                           f"({', '.join(map(str, self.choices))}); this does not count as a try.")
        if isinstance(self.answer, bool):
            b = _as_bool(given)
            if b is None:
                return Verdict(self.key, False, f"answer yes or no (True or False), not {given!r}. {self.prompt}")
            ok = b == self.answer
        elif isinstance(self.answer, (int, float)):
            try:
                g = float(given)
            except (TypeError, ValueError):
                return Verdict(self.key, False, f"expected a number, got {given!r}. {self.prompt}")
            tol = abs(self.answer) * self.tolerance if self.tolerance else 0
            ok = abs(g - self.answer) <= max(tol, 1e-12)
            if not ok:
                for trap, feedback in self.traps:
                    if isinstance(trap, (int, float)) and not isinstance(trap, bool) and \
                            abs(g - trap) <= max(abs(trap) * self.tolerance, 1e-12):
                        return self._wrong(given, feedback)
                for factor in (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 100, 0.01):
                    if self.answer and abs(g / factor - self.answer) <= max(tol, 1e-12):
                        return self._wrong(given, f"your number is off by a factor of {factor:g}: check the "
                                                  "unit the question asks for.")
        else:
            norm = self.normalise or (lambda s: str(s).strip().lower())
            ok = self.accept(given) if self.accept is not None else norm(given) == norm(self.answer)
            if not ok:
                for trap, feedback in self.traps:
                    if isinstance(trap, str) and norm(given) == norm(trap):
                        return self._wrong(given, feedback)
        if ok:
            return Verdict(self.key, True, f"right. {self.explain}")
        return self._wrong(given)

    def _wrong(self, given, hint: str = "") -> Verdict:
        """A wrong answer: a hint first; the explanation (and so the answer) from the second try on."""
        self.wrong_tries += 1
        if self.wrong_tries < 2:
            return Verdict(self.key, False, f"not quite ({given!r}). {hint or 'Look again and retry'} "
                                            f"(the next wrong try shows the answer; or call .reveal('{self.key}')).")
        return Verdict(self.key, False, f"not quite ({given!r}). {hint} {self.explain}".replace("  ", " "))


_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}


def _as_bool(x):
    """True/False for a yes/no answer; None when it is neither (so a typo is not a "no")."""
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) and x in (0, 1):
        return bool(x)
    if isinstance(x, str):
        w = x.strip().strip(".!").strip().lower()
        return True if w in _YES else False if w in _NO else None
    return None


@dataclass
class Exercises:
    """A lesson's questions. ``show()`` lists them; ``check(key, answer)`` judges one."""

    title: str
    questions: list[Question] = field(default_factory=list)

    def __getitem__(self, key) -> Question:
        for q in self.questions:
            if q.key == key:
                return q
        raise KeyError(f"no exercise {key!r}; the keys are: {', '.join(q.key for q in self.questions)}")

    def show(self) -> str:
        """The questions as text, one line each, with their choices (listed once)."""
        lines = [f"{self.title}:"]
        for q in self.questions:
            lines.append(f"  - {q.key}: {q.prompt}{q.choices_text()}")
        return "\n".join(lines)

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
        v.question, v.exercises, v.given = q, self, answer
        return v

    def reveal(self, key: str) -> Verdict:
        """The answer to question ``key`` and why, without an attempt."""
        q = self[key]
        return Verdict(key, None, f"the answer is {q.answer!r}: {q.explain}")

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

