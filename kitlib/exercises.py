""""Your turn" exercises: questions whose answers come from the capture in hand.

A lesson builds its questions from the capture it shows (live or recorded), so
the expected answer is always computed, never typed in, and the explanation
quotes the learner's own figures. ``check`` says right or wrong and why.

Example
-------
>>> ex = lesson01_exercises(trace)          # doctest: +SKIP
>>> ex.check("launch_count", 3)             # doctest: +SKIP
✓ launch_count: right. The operator made 3 launches ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Verdict:
    """The outcome of one check: ``correct`` is None when no answer was given."""

    key: str
    correct: bool | None
    message: str

    def __str__(self):
        mark = {True: "✓", False: "✗", None: "…"}[self.correct]
        return f"{mark} {self.key}: {self.message}"

    def _repr_markdown_(self):
        mark = {True: "✅", False: "❌", None: "✏️"}[self.correct]
        return f"{mark} **{self.key}** — {self.message}"

    __repr__ = __str__


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
    """

    key: str
    prompt: str
    answer: Any
    explain: str
    tolerance: float = 0.02
    normalise: Callable | None = None
    choices: list | None = None

    def judge(self, given) -> Verdict:
        if given is None or given is ...:
            return Verdict(self.key, None, "replace `None` with your answer and run the cell again. "
                                            f"Question: {self.prompt}")
        if isinstance(self.answer, bool):
            ok = _as_bool(given) == self.answer
        elif isinstance(self.answer, (int, float)):
            try:
                g = float(given)
            except (TypeError, ValueError):
                return Verdict(self.key, False, f"expected a number, got {given!r}. {self.prompt}")
            tol = abs(self.answer) * self.tolerance if self.tolerance else 0
            ok = abs(g - self.answer) <= max(tol, 1e-12)
        else:
            norm = self.normalise or (lambda s: str(s).strip().lower())
            ok = norm(given) == norm(self.answer)
        if ok:
            return Verdict(self.key, True, f"right. {self.explain}")
        return Verdict(self.key, False, f"not quite ({given!r}). {self.explain}")


def _as_bool(x):
    if isinstance(x, str):
        return x.strip().lower() in ("yes", "true", "y", "1")
    return bool(x)


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
        lines = [f"{self.title}:"]
        for q in self.questions:
            extra = f" (choose from: {', '.join(map(str, q.choices))})" if q.choices else ""
            lines.append(f"  - {q.key}: {q.prompt}{extra}")
        return "\n".join(lines)

    def check(self, key: str, answer) -> Verdict:
        """Judge ``answer`` to question ``key`` and explain it.

        Raises
        ------
        KeyError
            Unknown key (the message lists the known ones).
        """
        return self[key].judge(answer)

    def _repr_markdown_(self):
        return "\n".join([f"**{self.title}**", ""] + [f"- `{q.key}`: {q.prompt}" for q in self.questions])


# --- the lessons' questions ------------------------------------------------------

def lesson00(capture) -> Exercises:
    """Questions of lesson 00 (what are we profiling, and on what?), from ``capture``.

    Parameters
    ----------
    capture : kitlib.bundle.Capture
        A torch.profiler capture of the workload (live or recorded).
    """
    from .steps import step_table
    tr = capture.trace
    st = step_table(tr)
    batch = capture.workload.get("batch_size")
    phase_cols = [c for c in st.columns if c.endswith("_ms") and c != "wall_ms" and c != "gpu_time_ms"]
    second = st.iloc[min(1, len(st) - 1)]
    longest = max(phase_cols, key=lambda c: (second[c] if second[c] == second[c] else -1))[:-3]
    qs = [
        Question("images_per_step", "How many images does one training step process?", int(batch),
                 f"the batch size in the capture's manifest is {batch}: each step's data_load returns "
                 f"one batch of {batch} images."),
        Question("steps_recorded", "How many training steps did the profiler record (active steps)?", len(st),
                 f"the trace holds {len(st)} step annotations ({', '.join(tr.steps['name']) or 'none'}); "
                 "the schedule's wait and warm-up steps run but are not recorded."),
        Question("longest_phase", f"In step {int(second['step'])}, which labelled phase took the longest on the "
                                   "host (data_load, h2d, forward, backward or optimizer)?", longest,
                 "read it off the step table: " + ", ".join(f"{c[:-3]} {second[c]:.3f} ms" for c in phase_cols
                                                             if second[c] == second[c]) + ".",
                 choices=[c[:-3] for c in phase_cols]),
        Question("gpu_events_per_step", f"How many GPU events (kernels, copies, sets) did step "
                                        f"{int(second['step'])} launch?", int(second["gpu_events"]),
                 f"the step table's gpu_events column: {int(second['gpu_events'])} events whose launch lies "
                 "inside the step's host interval.", tolerance=0),
    ]
    return Exercises("Lesson 00 — your turn", qs)


def lesson01(capture) -> Exercises:
    """Questions of lesson 01 (which operation asked for this kernel?), from ``capture``.

    The operator studied is the first ``aten::cudnn_convolution`` of the capture's
    second recorded step.
    """
    from .chain import first_op, launches_of
    from .plots import short_name
    tr = capture.trace
    step = int(tr.steps["step"].iloc[0]) if len(tr.steps) else None
    row = first_op(tr, "aten::cudnn_convolution", step=step)
    ls = launches_of(tr, row)
    longest = int(ls.loc[ls["gpu_dur_ns"].idxmax(), "launch_index"])
    last = ls.iloc[-1]
    delay_us = (last["gpu_start_ns"] - last["launch_start_ns"]) / 1e3
    op_us = tr.ops.loc[row, "dur_ns"] / 1e3
    qs = [
        Question("launch_count", "How many CUDA launches did this convolution operator make?", len(ls),
                 f"its external id appears on {len(ls)} launches: "
                 + ", ".join(f"{r.launch_name} {r.launch_dur_ns / 1e3:.3f} µs" for r in ls.itertuples()) + ".",
                 tolerance=0),
        Question("longest_kernel_launch", "Which launch (1, 2, 3, …) produced the longest GPU event?", longest,
                 f"launch #{longest}: its kernel ran {ls['gpu_dur_ns'].max() / 1e3:.3f} µs on the GPU; the others: "
                 + ", ".join(f"#{r.launch_index} {short_name(r.gpu_name, 40)} {r.gpu_dur_ns / 1e3:.3f} µs"
                             for r in ls.itertuples() if r.launch_index != longest) + ".", tolerance=0),
        Question("launch_to_kernel_id", "Which id links a launch to the kernel it started: 'correlation' or "
                                        "'external'?", "correlation",
                 "CUPTI gives the API call and its GPU activity the same correlation id; the external id "
                 "is the profiler's link from both to the operator.",
                 normalise=lambda s: str(s).strip().lower().replace(" id", "").replace("_id", ""),
                 choices=["correlation", "external"]),
        Question("add_host_and_device", f"Is {op_us:.3f} µs (operator, host) + {ls['gpu_dur_ns'].sum() / 1e3:.3f} µs "
                                        "(its kernels, device) the operator's cost? (yes/no)", False,
                 "no: the operator's host interval and its kernels' device time are different clocks' work, "
                 "and they overlap in time. Host time is not device time; report them separately."),
        Question("queue_delay_us", f"How many µs after launch #{len(ls)} began did its kernel start on the GPU?",
                 round(delay_us, 3),
                 f"gpu start − launch start = {delay_us:,.3f} µs: the kernel waited in the stream's queue "
                 "behind earlier work. A launch returning is not the kernel running.", tolerance=0.01),
    ]
    return Exercises("Lesson 01 — your turn", qs)
