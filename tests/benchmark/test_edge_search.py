"""The edge search's stream names: whole edge rounds counted from the probes a result stored."""

from helpers.benchmark.edge_search import coarse_stream, edge_rounds_done, edge_stream, is_coarse_stream


def test_whole_edge_rounds_are_counted_from_the_probes_streams():
    assert edge_rounds_done(["p0", "p1", "e0-lo", "e0-hi", "e1-lo", None, "e1-lo-short"]) == 1  # e1 has no hi
    assert edge_rounds_done(["e0-hi", "e0-lo", "e1-hi", "e1-lo", "e10-lo"]) == 2
    assert edge_rounds_done([]) == 0


def test_the_names_the_search_writes_are_the_names_it_reads_back():
    assert [coarse_stream(n) for n in (0, 12)] == ["p0", "p12"]
    assert all(is_coarse_stream(coarse_stream(n)) for n in (0, 7, 31))
    assert not any(is_coarse_stream(edge_stream(r, side)) for r in (0, 3) for side in ("lo", "hi"))
    assert edge_rounds_done([edge_stream(r, side) for r in range(3) for side in ("lo", "hi")]) == 3
    assert edge_rounds_done([edge_stream(0, "lo"), coarse_stream(0)]) == 0
