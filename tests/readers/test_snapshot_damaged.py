"""kitlib.readers.snapshot on damaged copies of the reference memory snapshot (issue 17).

A damaged snapshot gets a KitFileError that says what in the snapshot is wrong and
where (``segments[3]['blocks'][0]['size'] is text``), never Python's own words alone
("unhashable type: 'dict'"); a pickle that asks for code is still refused before
anything runs.
"""
import copy
import pickle

import pytest

from kitlib.errors import KitFileError, UnsafePickleError
from kitlib.readers.snapshot import load_memory_snapshot, load_plain_pickle

from support.damage import SNAPSHOT
from support.errors import refused


@pytest.fixture(scope="module")
def raw():
    return load_plain_pickle(SNAPSHOT)


def _write_pickle(path, obj):
    path.write_bytes(pickle.dumps(obj, protocol=4))
    return path


def _snapshot_refused(path, *words):
    msg = refused(load_memory_snapshot, path, KitFileError, *words)
    assert "Error:" not in msg and "unhashable type" not in msg, msg   # no bare Python words
    return msg


def test_unhashable_key_says_what_the_pickle_builds(tmp_path):
    # A pickle whose dict is keyed by a dict: what a flipped opcode can produce.
    # {{}: 1} by hand: PROTO 4, EMPTY_DICT, MEMOIZE, MARK, EMPTY_DICT, MEMOIZE, 1, SETITEMS, STOP
    data = b"\x80\x04}\x94(}\x94K\x01u."
    p = tmp_path / "key.pickle"
    p.write_bytes(data)
    _snapshot_refused(p, "damaged pickle", "keyed by a dict", "near byte")


def test_garbage_bytes_get_a_position(tmp_path):
    p = tmp_path / "garbage.pickle"
    p.write_bytes(b"\x80\x04\xff\xfe not a pickle at all")
    _snapshot_refused(p, "not a readable pickle", "near byte", "is this really a .pickle file?")


@pytest.mark.parametrize("damage,words", [
    (lambda r: r["segments"][3]["blocks"][0].update(size="512"),
     ["segments[3]['blocks'][0]['size'] is text", "an integer"]),
    (lambda r: r["segments"][0].update(blocks={"size": 1}),
     ["segments[0]['blocks'] is a dictionary", "a list"]),
    (lambda r: r["segments"][2].pop("total_size"), ["segments[2] has no 'total_size'"]),
    (lambda r: r["segments"].__setitem__(1, [1, 2]), ["segments[1] is a list"]),
    (lambda r: r["device_traces"][0][17].update(size={"bytes": 1}),
     ["device_traces[0][17]['size'] is a dictionary"]),
    (lambda r: r["device_traces"][0][5].update(time_us=1.5),
     ["device_traces[0][5]['time_us'] is a fraction"]),
    (lambda r: r["device_traces"][0][9].update(frames={"x": 1}),
     ["device_traces[0][9]['frames'] is a dictionary", "list of frames"]),
    (lambda r: r["device_traces"][0][9]["frames"].__setitem__(0, "torch::unwind"),
     ["device_traces[0][9]['frames'][0] is text"]),
    (lambda r: r["device_traces"][0][3].pop("action"), ["device_traces[0][3] has no 'action'"]),
    (lambda r: r["device_traces"][0][3].update(size=-8), ["device_traces[0][3]['size'] is -8"]),
    (lambda r: r["external_annotations"][0].update(time_us=None),
     ["external_annotations[0]['time_us'] is nothing (None)"]),
    (lambda r: r["segments"][0].update(address=1 << 70), ["segments[0]['address'] is"]),
])
def test_wrong_values_are_named_by_their_place(tmp_path, raw, damage, words):
    bad = copy.deepcopy(raw)
    damage(bad)
    _snapshot_refused(_write_pickle(tmp_path / "memory_snapshot.pickle", bad),
             "not a CUDA memory snapshot kitlib understands", *words)


def test_undamaged_copy_still_loads_the_same(tmp_path, raw):
    snap = load_memory_snapshot(_write_pickle(tmp_path / "same.pickle", copy.deepcopy(raw)))
    ref = load_memory_snapshot(SNAPSHOT)
    assert len(snap.events) == len(ref.events) == 8649
    assert len(snap.segments) == len(ref.segments) and len(snap.blocks) == len(ref.blocks)


def test_code_is_still_refused_inside_a_damaged_snapshot(tmp_path, raw):
    # A global in an otherwise plain snapshot is refused before anything is built.
    p = tmp_path / "evil.pickle"
    body = pickle.dumps({"segments": [], "device_traces": []}, protocol=0)
    p.write_bytes(b"cos\nsystem\n(Vtouch " + str(tmp_path / "PWNED").encode() + b"\ntR" + body)
    with pytest.raises(UnsafePickleError, match="os.system"):
        load_memory_snapshot(p)
    assert not (tmp_path / "PWNED").exists()


def test_a_damaged_frame_shared_by_many_stacks_is_found_where_it_first_appears(raw, tmp_path):
    # The snapshot's pickle shares each frame dict between many stack entries, and the
    # checker looks at each sound frame dict once: a damaged shared one must still be
    # reported, at its first appearance in reading order (segments, then device_traces).
    r = copy.deepcopy(raw)          # deepcopy keeps the sharing (its memo), as pickle does
    frame = r["device_traces"][0][9]["frames"][0]
    places = [f"segments[{i}]['blocks'][{j}]['frames'][{k}]"
              for i, s in enumerate(r["segments"]) for j, b in enumerate(s.get("blocks", []))
              for k, f in enumerate(b.get("frames") or []) if f is frame]
    places += [f"device_traces[{d}][{e}]['frames'][{k}]"
               for d, tr in enumerate(r["device_traces"]) for e, ev in enumerate(tr)
               for k, f in enumerate(ev.get("frames") or []) if f is frame]
    assert len(places) > 1, "the reference snapshot shares this frame between stacks"
    frame["line"] = "2817"
    msg = _snapshot_refused(_write_pickle(tmp_path / "shared.pickle", r), f"{places[0]}['line'] is text")
    assert places[1] not in msg
