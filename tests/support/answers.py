"""How each lesson's answer tests build its questions: ``QUESTIONS[NN]()`` is what the fixture
``ex`` of tests/conftest.py gives the tests of tests/lessons/test_answers_lNN.py (once per module),
on the kit's recordings. Lesson 01's file has its own ``ex``: its questions come from the
learner's own CPU run, which a fixture of that file makes. Each builder imports the
exercise module when called, so that tools/exercise_mutants.py's children build from the
mutant they installed."""
from conftest import REF

NCCL = REF / "public-traces"


def lesson00():
    from kitlib import open_capture
    from kitlib.course import exercises
    return exercises.lesson00(open_capture("profiler_5step"), cold=open_capture("cold_start_8step"))


def lesson02():
    from kitlib import open_capture
    from kitlib.course import exercises
    return exercises.lesson02(open_capture("profiler_5step"))


def lesson03():
    from kitlib.course import exercises, lesson_capture
    return exercises.lesson03(lesson_capture("profiler_5step"))


def lesson04():
    import kitlib
    from kitlib.course import exercises
    return exercises.lesson04({"cold": kitlib.open_capture("cold_start_8step"),
                               "timing": kitlib.open_capture("profiler_5step")})


def lesson05():
    from kitlib.course import exercises, lesson_capture
    return exercises.lesson05(lesson_capture("fixed_batch"))


def lesson06():
    from kitlib.course import exercises, lesson_capture
    return exercises.lesson06(lesson_capture("fixed_batch"))


def lesson07():
    from kitlib.course import exercises
    from kitlib.readers.bundle import open_capture
    return exercises.lesson07(open_capture("profiler_5step"))


def lesson08():
    from kitlib.course import exercises
    from kitlib.readers.bundle import open_capture
    return exercises.lesson08(open_capture("fixed_batch"))


def lesson09():
    from kitlib.course.exercises import l09
    from kitlib.readers.bundle import open_capture
    return l09.questions(open_capture("nsys_8step"), emit=open_capture("nsys_emit_nvtx"))


def lesson10():
    from kitlib.course import exercises
    from kitlib.readers.bundle import open_capture
    return exercises.lesson10(open_capture("profiler_5step"))


def lesson11():
    from kitlib.course.exercises import l11
    return l11.questions()


def lesson12():
    from kitlib.course.exercises import l12
    from kitlib.readers.ranks import load_traces
    return l12.questions(load_traces("ranks_straggler"), load_traces(NCCL, partial=True), injected_ms=500.0,
                         balanced=load_traces("ranks_balanced"))


def lesson13():
    from kitlib.course.exercises import l13
    return l13.questions()


QUESTIONS = {"00": lesson00, "02": lesson02, "03": lesson03, "04": lesson04, "05": lesson05, "06": lesson06, "07": lesson07,
             "08": lesson08, "09": lesson09, "10": lesson10, "11": lesson11, "12": lesson12, "13": lesson13}
