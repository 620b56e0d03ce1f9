"""Lesson 01's questions (how do I record a profile?), from the learner's own recording."""
from __future__ import annotations

from . import Exercises, Question
from ...units import bytes_to_mib


def questions(trace_path, memory_timeline_path=None, schedule: dict | None = None, steps_run: int | None = None
              ) -> Exercises:
    """Questions of lesson 01, computed from the files the learner's profile wrote.

    Parameters
    ----------
    trace_path : path
        The Chrome trace written by ``on_trace_ready`` (``prof.export_chrome_trace``).
    memory_timeline_path : path, optional
        The ``export_memory_timeline(....json)`` file; adds the activation question.
    schedule : dict, optional
        ``wait``, ``warmup``, ``active`` of the profiler's schedule (default: the
        lesson's, :data:`kitlib.course.first_profile.SCHEDULE`).
    steps_run : int, optional
        How many times the loop called ``prof.step()`` (default: the lesson's 5).
    """
    from ...analyses.four_measures import self_total
    from ...readers.memory_timeline import load_memory_timeline
    from ...readers.trace import load_trace
    from ..first_profile import SCHEDULE, STEPS_RUN
    sch = dict(schedule or SCHEDULE)
    run = int(steps_run or STEPS_RUN)
    tr = load_trace(trace_path)
    n_steps = len(tr.steps)
    conv = tr.ops[tr.ops["name"] == "aten::conv2d"]
    shapes = conv["input_dims"].map(str).nunique()
    st = self_total(tr, kinds=("op",)).sort_values("self_ns", ascending=False)
    top = st["name"].iloc[0]
    qs = [
        Question("steps_in_trace", f"Predict: with schedule(wait={sch['wait']}, warmup={sch['warmup']}, "
                                   f"active={sch['active']}) and {run} calls to prof.step(), how many ProfilerStep#N "
                                   "does the trace hold?", n_steps,
                 f"{n_steps}: {', '.join(tr.steps['name'])}. The wait step runs without recording, the warm-up "
                 "step records and throws the result away (the profiler's own start-up cost lands there), and "
                 "only the active steps reach on_trace_ready.", tolerance=0,
                 traps=[(run, "that counts every step the loop ran; the wait and warm-up steps are not in the "
                              "trace."),
                        (sch["warmup"] + sch["active"], "the warm-up step is recorded but discarded: it is not in "
                                                         "the trace.")]),
        Question("conv_calls", "How many aten::conv2d calls does the trace hold?", len(conv),
                 f"{len(conv)}: one per recorded step (the model has one convolution), the same count as the "
                 "'# of Calls' column of key_averages().", tolerance=0,
                 traps=[(run, "the trace holds the active steps only, not every step the loop ran.")]),
        Question("conv_shape_groups", "Into how many input-shape groups does key_averages(group_by_input_shape=True) "
                                      "split aten::conv2d?", shapes,
                 f"{shapes}: every call had the same input shapes ({conv['input_dims'].iloc[0][:2]} …); a real "
                 "model with layers of different sizes would split one name into many groups (lesson 05).",
                 tolerance=0),
        Question("top_self_op", "Which operator has the largest self CPU time in your recording?", top,
                 f"{top}: {st['self_ns'].iloc[0] / 1e6:,.2f} ms of self time over {int(st['calls'].iloc[0])} calls "
                 "(total minus what it called). Sort by self time to find where the thread itself spent time.",
                 normalise=lambda s: str(s).strip().lower()),
    ]
    if memory_timeline_path is not None:
        tl = load_memory_timeline(memory_timeline_path)
        act = float(bytes_to_mib(tl["activation_bytes"].max()))
        qs.append(Question("peak_activation_mib", "From the memory timeline: the most memory held by activations "
                                                  "at any moment, in MiB?", round(act, 2),
                           f"{act:,.2f} MiB: the forward pass's outputs kept for backward, freed as backward uses "
                           "them. Parameters and gradients stay; activations come and go every step.",
                           tolerance=0.02,
                           traps=[(round(float(bytes_to_mib(tl["total_bytes"].max())), 2),
                                   "that is the peak of all categories together; the question asks for "
                                   "activations only.")]))
    return Exercises("Lesson 01 — your turn", qs)
