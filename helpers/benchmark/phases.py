"""Step 5's phases in the order they run on one engine configuration: the only module that imports them all.

Launch and cold start, the quality set, the sweep, the lengths-only replay, the structured replays, the
capacity search (or fixed-load trials), the cross-check with the engine's own client, the batching comparison
(all while the configuration's engine is up), then the batch-size tuning (launches of its own). The plan
(``helpers.benchmark.plan``) asks each for its units and record files; ``helpers.benchmark.run`` runs them.
"""

from __future__ import annotations

from helpers.benchmark.batching import BATCHING
from helpers.benchmark.crosscheck_phase import CROSSCHECK
from helpers.benchmark.quality_phase import QUALITY
from helpers.benchmark.replay_phase import REPLAY
from helpers.benchmark.session import Phase
from helpers.benchmark.structured_phase import STRUCTURED
from helpers.benchmark.sweep_phase import START, SWEEP
from helpers.benchmark.trials import EVIDENCE
from helpers.benchmark.tuning import TUNING

PHASES: tuple[Phase, ...] = (START, QUALITY, SWEEP, REPLAY, STRUCTURED, EVIDENCE, CROSSCHECK, BATCHING, TUNING)
"""Step 5 on one configuration, in order; the ``on_engine`` ones while its engine is up, the others after."""
