"""Checklist step 3: the team answers from the config, read the way the decision step reads them.

Seed 003 §7.1 step 3 asks for team size (small < 5, big > 10), MLOps maturity (build pipelines,
automated deployment) and the will to pay operations effort for the last 10-15%; §3.4 and §3.5
step 4 turn them into a leaning: a small, fast-moving team → vLLM; a big, MLOps-mature team that
chases peak performance → TensorRT-LLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import pandas as pd

if TYPE_CHECKING:
    from helpers.core.config import PlaybookConfig, Team

TeamSize = Literal["small", "medium", "big"]

SMALL_TEAM_BELOW = 5  # seed 003 §7.1: small team < 5 people
BIG_TEAM_ABOVE = 10  # seed 003 §7.1: big team > 10 people

_SIZE_GUIDANCE: dict[str, str] = {
    "small": "Small team (< 5): favours vLLM — one container, few settings, no compile pipeline (§3.4).",
    "medium": "Between the seed's small (< 5) and big (> 10): the other answers decide (§7.1).",
    "big": "Big team (> 10): can staff a compile pipeline and kernel-level tuning (§3.4).",
}
_MATURITY_GUIDANCE: dict[str, str] = {
    "low": "No build/deploy automation: TensorRT-LLM's engine builds per model and shape would be manual "
    "work; favours vLLM (§3.4).",
    "medium": "Some automation: a TensorRT-LLM build pipeline is possible but is new work to own (§3.4).",
    "high": "Mature MLOps: TensorRT-LLM's compile pipeline and quantization details are affordable (§3.4).",
}
_PEAK_GUIDANCE: dict[bool, str] = {
    True: "Willing to pay operations effort for the last 10-15% of throughput: TensorRT-LLM's case (§3.4).",
    False: "Not chasing the last 10-15%: simpler operations win; favours vLLM (§3.4).",
}


def team_size_class(size: int) -> TeamSize:
    """Small (< 5), big (> 10) or medium, as seed 003 §7.1 step 3 draws the lines."""
    if size < SMALL_TEAM_BELOW:
        return "small"
    return "big" if size > BIG_TEAM_ABOVE else "medium"


def team_leaning(team: Team) -> str:
    """Return the engine the team answers point to at §3.5 step 4: ``trtllm``, ``vllm`` or ``either``.

    The one reading, used by the decision step too (``helpers.decision.tree``), with the seed's lines as
    written: a big team (> 10) with mature MLOps that chases peak performance leans TensorRT-LLM; a small
    one (< 5) or one without automation leans vLLM; in between there is no clear leaning.
    """
    if team.chase_peak and team.mlops_maturity == "high" and team.size > BIG_TEAM_ABOVE:
        return "trtllm"
    if team.size < SMALL_TEAM_BELOW or team.mlops_maturity == "low":
        return "vllm"
    return "either"


_LEANING_TEXT = {
    "trtllm": "TensorRT-LLM: big team, mature MLOps, chasing peak performance (§3.5 step 4).",
    "vllm": "vLLM: small team or little build/deploy automation (§3.5 step 4).",
    "either": "No clear leaning (between the seed's small and big teams, or not all of big team, mature MLOps "
    "and chasing peak): let the measured throughput and cost decide (§3.5 step 4).",
}


def team_table(cfg: PlaybookConfig | Team) -> pd.DataFrame:
    """Return the team answers, how the decision reads each, and the seed's guidance; a last row sums up."""
    team = getattr(cfg, "team", cfg)
    size = team_size_class(team.size)
    lean = team_leaning(team)
    rows = [
        ("team size (engineers running the stack)", str(team.size), size, _SIZE_GUIDANCE[size]),
        ("MLOps maturity", team.mlops_maturity, team.mlops_maturity, _MATURITY_GUIDANCE[team.mlops_maturity]),
        (
            "chase the last 10-15%",
            "yes" if team.chase_peak else "no",
            str(team.chase_peak).lower(),
            _PEAK_GUIDANCE[team.chase_peak],
        ),
        ("team leaning", "", lean, _LEANING_TEXT[lean]),
    ]
    return pd.DataFrame(rows, columns=["question", "answer", "read as", "guidance"])
