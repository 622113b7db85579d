"""The edge search's stream names: whole edge rounds counted from the probes a result stored."""

from helpers.benchmark.edge_search import edge_rounds_done


def test_whole_edge_rounds_are_counted_from_the_probes_streams():
    assert edge_rounds_done(["p0", "p1", "e0-lo", "e0-hi", "e1-lo", None, "e1-lo-short"]) == 1  # e1 has no hi
    assert edge_rounds_done(["e0-hi", "e0-lo", "e1-hi", "e1-lo", "e10-lo"]) == 2
    assert edge_rounds_done([]) == 0
