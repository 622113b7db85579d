"""Progress events and the ETA: counts as units finish, are kept or dropped; the estimate refined by measurement."""

import pytest

from helpers.run.progress import PROGRESS_FILE, ProgressEvents, Tracker, Unit, cut_starts, read_events


def unit(key: str, kind: str, seconds: float, label: str = "a") -> Unit:
    return Unit(key=key, label=label, kind=kind, what=key, expected_s=seconds)


PLAN = [
    unit("cold", "cold", 100),
    unit("s1", "sweep", 10),
    unit("s8", "sweep", 20),
    unit("p0", "probe", 15),
    unit("p1", "probe", 15),
]


def tracker(*events: dict) -> Tracker:
    t = Tracker()
    t.apply({"event": "plan", "t": 0, "units": [u.model_dump() for u in PLAN]})
    for ev in events:
        t.apply(ev)
    return t


def start(key: str, t: float) -> dict:
    return {"event": "start", "t": t, "unit": next(u for u in PLAN if u.key == key).model_dump()}


def test_before_anything_ran_the_eta_is_the_plan():
    t = tracker()
    assert (t.finished, t.total) == (0, 5)
    assert t.eta_s(0) == 160


def test_the_running_unit_counts_with_what_is_left_of_it():
    t = tracker(start("cold", 0))
    assert t.eta_s(30) == 70 + 10 + 20 + 30
    assert t.eta_s(500) == 10 + 20 + 30  # overran its estimate: nothing left of it, never negative


def test_measured_cold_start_and_pace_replace_the_priors():
    # the cold start took 60 s (not 100); the first sweep point 20 s (expected 10: the machine is twice as slow)
    t = tracker(start("cold", 0), start("s1", 60), start("s8", 80))
    assert t.seconds == {"cold": 60, "s1": 20}
    # s8: 20 s expected x 2 = 40 s, just started; the probes have no measurement of their group: overall pace 2
    assert t.eta_s(80) == pytest.approx(40 + 2 * 15 * 2)
    # a probe measured at its expected pace: the open-loop group has its own ratio from now on
    t2 = tracker(start("cold", 0), start("s1", 60), start("p0", 80), {"event": "done", "t": 95, "key": "p0"})
    assert t2.eta_s(95) == pytest.approx(20 * 2 + 15 * 1)
    assert t2.estimate_s(unit("cold2", "cold", 100)) == 60  # a later cold start: the one measured


def test_the_pace_follows_the_recent_units():
    # 6 sweep units: the first slow (it also imported the load generator), the last four at the expected pace
    units = [unit(f"s{i}", "sweep", 10) for i in range(7)]
    t = Tracker()
    t.apply({"event": "plan", "t": 0, "units": [u.model_dump() for u in units]})
    times = [0, 100, 110, 120, 130, 140, 150]
    for i, at in enumerate(times):
        t.apply({"event": "start", "t": at, "unit": units[i].model_dump()})
    assert t.estimate_s(units[6]) == pytest.approx(10.0)


def test_kept_units_are_done_at_once_and_teach_nothing():
    t = tracker({"event": "kept", "t": 0, "key": "cold"}, {"event": "kept", "t": 0, "key": "s1"}, start("s8", 0))
    assert (t.finished, t.total) == (2, 5)
    assert t.eta_s(0) == 20 + 30  # no measured pace: the priors
    whole = tracker({"event": "kept", "t": 0, "label": "a"})
    assert (whole.finished, whole.total) == (5, 5) and whole.eta_s(0) == 0


def test_dropped_units_shrink_the_total_and_the_eta():
    # the search converged after one probe: the other probe is not needed
    t = tracker(start("p0", 0), {"event": "drop", "t": 20, "label": "a", "kinds": ["probe"], "keys": None})
    assert t.state["p0"] == "done" and t.state["p1"] == "dropped"  # the running one spent its time: done
    assert (t.finished, t.total) == (1, 4)
    other = tracker({"event": "drop", "t": 0, "label": "b", "kinds": None, "keys": None})
    assert other.total == 5  # another configuration's drop leaves these alone


def test_a_dropped_unit_that_starts_after_all_counts_again():
    t = tracker({"event": "drop", "t": 0, "label": "a", "kinds": None, "keys": None}, start("s8", 1))
    assert t.total == 1 and t.running == "s8"


def test_an_unplanned_unit_joins_and_the_end_completes_the_bar():
    extra = unit("t9", "trial", 15)
    t = tracker(start("s1", 0), {"event": "start", "t": 10, "unit": extra.model_dump()})
    assert t.total == 6 and t.state["s1"] == "done"  # a start closes the unit before it
    t.apply({"event": "end", "t": 30})
    assert t.finished == t.total == 2 and t.eta_s(30) == 0


def test_a_new_plan_starts_over():
    t = tracker(start("cold", 0), start("s1", 50))
    t.apply({"event": "plan", "t": 60, "units": [PLAN[0].model_dump()]})
    assert (t.finished, t.total, t.running) == (0, 1, None)


def test_events_round_trip_through_the_file(tmp_path):
    path = tmp_path / "logs" / "progress.jsonl"
    clock = iter([1.0, 2.0, 3.0, 4.0])
    ev = ProgressEvents(path, clock=lambda: next(clock))
    ev.plan(PLAN)
    ev.start(PLAN[0])
    ev.done("cold")
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"event": "note", "t": 4, "te')  # a line still being written
    events, offset = read_events(path)
    assert [e["event"] for e in events] == ["plan", "start", "done"]
    assert events[1]["t"] == 2.0 and events[1]["unit"]["key"] == "cold"
    with open(path, "a", encoding="utf-8") as f:
        f.write('xt": "hello"}\nnot json\n')
    more, offset2 = read_events(path, offset)
    assert more == [{"event": "note", "t": 4, "text": "hello"}] and offset2 == path.stat().st_size
    t = Tracker()
    for e in events:
        t.apply(e)
    assert t.seconds == {"cold": 1.0}


def test_a_progress_file_that_cannot_be_written_never_stops_the_run(tmp_path):
    blocked = tmp_path / "progress.jsonl"
    blocked.mkdir()  # a folder where the file should be: every append fails
    ev = ProgressEvents(blocked)
    ev.note("one")  # no exception
    assert ev.path is None
    ev.note("two")
    assert read_events(blocked) == ([], 0)


def test_starts_begun_and_never_done_are_found_with_their_last_note(tmp_path):
    ev = ProgressEvents(tmp_path / PROGRESS_FILE)
    tm, vl = unit("tm|cold|main", "cold", 76, label="tm"), unit("vl|cold|main", "cold", 62, label="vl")
    for attempt in range(2):  # two attempts cut while the weights were written
        ev.plan([tm, vl])
        ev.start(tm)
        if attempt:
            ev.note("random weights: shard 9 of 18 written, 36.1 of 72.7 GB in 4m10s (144 MB/s); ETA 4m13s")
    ev.plan([tm, vl])
    ev.kept_label("tm")
    ev.start(vl)
    ev.note("vl: launching (python)")
    ev.done("vl|cold|main")
    ev.start(unit("vl|sweep|100", "sweep", 20, label="vl"))  # then cut in its sweep: not a cut start
    assert cut_starts(tmp_path, "tm") == ["", "random weights: shard 9 of 18 written, 36.1 of 72.7 GB in 4m10s "
                                              "(144 MB/s); ETA 4m13s"]  # fmt: skip
    assert cut_starts(tmp_path, "vl") == [] and cut_starts(tmp_path / "none", "tm") == []
