"""Lesson 01's questions (how do I record a profile?), from the learner's own recording."""
from __future__ import annotations

from . import Exercises, Question
from ...units import bytes_to_mib

#: The schedule of the "what changes if" question (``repeat=1``: one cycle, one trace).
OTHER_SCHEDULE = {"wait": 2, "warmup": 1, "active": 2, "repeat": 1}
#: How many times that question's loop calls ``prof.step()``.
OTHER_STEPS_RUN = 8


def recorded_steps(schedule: dict, steps_run: int) -> int:
    """How many of ``steps_run`` steps ``torch.profiler.schedule(**schedule)`` records (asked of torch)."""
    from torch.profiler import ProfilerAction, schedule as make
    sch = make(**schedule)
    return sum(sch(i) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE) for i in range(steps_run))


def questions(trace_path=None, memory_timeline_path=None, schedule: dict | None = None, steps_run: int | None = None
              ) -> Exercises:
    """Questions of lesson 01 from the learner's Chrome trace (without it, only the prediction
    ``steps_in_trace``, from the ``schedule`` and ``steps_run``, defaults the lesson's:
    :mod:`kitlib.course.first_profile`) and ``export_memory_timeline`` file (the activation question)."""
    from ..first_profile import SCHEDULE, STEPS_RUN
    sch = dict(schedule or SCHEDULE)
    run = int(steps_run or STEPS_RUN)
    sch_text = f"schedule(wait={sch['wait']}, warmup={sch['warmup']}, active={sch['active']})"
    if trace_path is None:
        n_steps, names = recorded_steps(sch, run), None
    else:
        from ...readers.trace import load_trace
        tr = load_trace(trace_path)
        n_steps, names = len(tr.steps), list(tr.steps["name"])
    qs = [
        Question("steps_in_trace", f"Predict: with {sch_text} and {run} calls to prof.step(), how many "
                                   "ProfilerStep#N will the trace hold?", n_steps,
                 f"{n_steps}" + (f" ({', '.join(names)})" if names else "") + ": the wait step runs without "
                 "recording, the warm-up step records and throws the result away (the profiler's start-up cost "
                 "lands there), and only the active steps reach on_trace_ready.", tolerance=0, kind="predict",
                 where="the schedule's active steps",
                 traps=[(run, "that counts every step the loop ran; the wait and warm-up steps are not in the "
                              "trace."),
                        (sch["warmup"] + sch["active"], "the warm-up step is recorded but discarded: it is not in "
                                                         "the trace.")]),
    ]
    if trace_path is None:
        return Exercises("Lesson 01 — your prediction", qs)
    from ...analyses.four_measures import self_total
    conv = tr.ops[tr.ops["name"] == "aten::conv2d"]
    per_step = len(conv) // max(n_steps, 1)
    other = recorded_steps(OTHER_SCHEDULE, OTHER_STEPS_RUN)
    o = OTHER_SCHEDULE
    other_text = f"schedule(wait={o['wait']}, warmup={o['warmup']}, active={o['active']}, repeat={o['repeat']})"
    dims = conv["input_dims"].iloc[0] if len(conv) else [[0, 0, 0, 0], [0, 0, 0, 0]]
    (n, c_in, h, w), c_out = dims[0], dims[1][0]
    second = [[n, c_out, h, w], [c_out, c_out, 3, 3], *dims[2:]]   # Conv2d(c_out, c_out, 3, padding=1) after the ReLU
    groups = len({str(d) for d in conv["input_dims"]} | {str(second)})
    st = self_total(tr, kinds=("op",)).sort_values("self_ns", ascending=False)
    top = st["name"].iloc[0]
    qs += [
        Question("conv_calls_if", f"What changes if the same loop ran {OTHER_STEPS_RUN} steps under "
                                  f"{other_text}: how many aten::conv2d calls would the trace hold?", other * per_step,
                 f"{other * per_step}: that schedule records {other} steps ({o['wait']} skipped, {o['warmup']} warm-up "
                 f"thrown away, {o['active']} active, then no further cycle), and your model calls aten::conv2d {per_step} "
                 f"time(s) per step (your trace: {len(conv)} calls in {n_steps} steps).", kind="transfer",
                 where="your trace's aten::conv2d count per recorded step, times the active steps of the new schedule",
                 traps=[(OTHER_STEPS_RUN * per_step, "that counts every step the loop ran; only the active steps "
                                                     "are in the trace."),
                        (len(conv), "that is your own run's count; the new schedule has another number of active "
                                    "steps."),
                        ((o["warmup"] + o["active"]) * per_step, "the warm-up step is recorded but discarded: it "
                                                                 "is not in the trace.")]),
        Question("conv_shape_groups", f"What changes if the model had a second nn.Conv2d({c_out}, {c_out}, 3, "
                                      "padding=1) right after the ReLU: into how many input-shape groups would "
                                      "key_averages(group_by_input_shape=True) split aten::conv2d?", groups,
                 f"{groups}: your convolution's inputs are {dims[0]} with weights {dims[1]}; the second one would "
                 f"take {second[0]} with weights {second[1]}. A group is one distinct list of input shapes, so one "
                 "name becomes as many rows as there are distinct problems (lesson 05 does this for ResNet-50).",
                 tolerance=0, kind="transfer",
                 where="the Input Shapes column of your group_by_input_shape table, and the new layer's input",
                 traps=[(1, "the two convolutions share a name, not their input shapes: the second one's input "
                            f"has {c_out} channels."),
                        (2 * n_steps, "group_by_input_shape counts distinct shapes, not calls: each group adds up "
                                      "all its calls.")]),
        Question("top_self_op", "Which operator has the largest self CPU time in your recording?", top,
                 f"{top}: {st['self_ns'].iloc[0] / 1e6:,.2f} ms of self time over {int(st['calls'].iloc[0])} calls "
                 "(total minus what it called). Sort by self time to find where the thread itself spent time.",
                 normalise=lambda s: str(s).strip().lower(), kind="compute",
                 where="the key_averages table sorted by self_cpu_time_total: its Self CPU column"),
    ]
    if memory_timeline_path is not None:
        from ...readers.memory_timeline import load_memory_timeline
        tl = load_memory_timeline(memory_timeline_path)
        act = round(float(bytes_to_mib(tl["activation_bytes"].max())), 2)
        total = round(float(bytes_to_mib(tl["total_bytes"].max())), 2)
        qs.append(Question("peak_activation_mib", "From the memory timeline: the most memory held by activations "
                                                  "at any moment, in MiB?", act,
                           f"{act:,.2f} MiB: the forward pass's outputs kept for backward, freed as backward uses "
                           "them. Parameters and gradients stay; activations come and go every step.",
                           kind="compute", unit="MiB",
                           where="timeline's activation_bytes column: its largest value, ÷ 2**20",
                           traps=[(total, "that is the peak of all categories together; the question asks for "
                                          "activations only.")]))
    return Exercises("Lesson 01 — your turn", qs)
