import pytest

from helpers.core.config import Team
from helpers.environment.team import team_leaning, team_size_class, team_table


@pytest.mark.parametrize(("size", "cls"), [(1, "small"), (4, "small"), (5, "medium"), (10, "medium"), (11, "big")])
def test_size_lines_follow_the_seed(size, cls):
    assert team_size_class(size) == cls


def test_small_team_leans_vllm_big_mature_peak_team_leans_trtllm():
    assert team_leaning(Team(size=3, mlops_maturity="high", chase_peak=True)) == "vllm"
    assert team_leaning(Team(size=20, mlops_maturity="high", chase_peak=True)) == "trtllm"
    assert team_leaning(Team(size=20, mlops_maturity="low", chase_peak=True)) == "vllm"
    assert team_leaning(Team(size=7, mlops_maturity="medium", chase_peak=True)) == "either"


@pytest.mark.parametrize("size", [1, 4, 5, 8, 11, 30])
@pytest.mark.parametrize("maturity", ["low", "medium", "high"])
@pytest.mark.parametrize("peak", [True, False])
def test_leaning_agrees_with_the_decision_step(size, maturity, peak):
    from types import SimpleNamespace

    from helpers.decision.tree import _team_condition

    team = Team(size=size, mlops_maturity=maturity, chase_peak=peak)
    expected = {"large_peak": "trtllm", "small": "vllm", "middle": "either"}
    assert team_leaning(team) == expected[_team_condition(SimpleNamespace(team=team))]


def test_table_shows_answers_reading_and_guidance():
    df = team_table(Team(size=12, mlops_maturity="high", chase_peak=True))
    assert list(df.columns) == ["question", "answer", "read as", "guidance"]
    assert df["answer"].iloc[0] == "12" and df["read as"].iloc[0] == "big"
    assert "> 10" in df["guidance"].iloc[0]
    assert df["read as"].iloc[-1] == "trtllm"
    assert all(g for g in df["guidance"])


def test_table_reads_a_whole_config():
    from helpers.core.config import load_config
    from helpers.core.paths import WORKLOADS_DIR
    from helpers.environment.hardware import hardware_plan_table

    cfg = load_config(WORKLOADS_DIR / "default.yaml")
    df = team_table(cfg)
    assert df["answer"].iloc[0] == str(cfg.team.size)
    assert hardware_plan_table(cfg)["answer"].iloc[0] == cfg.hardware.vendors
