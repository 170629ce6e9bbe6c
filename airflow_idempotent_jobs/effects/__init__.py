"""Effects after the payment (publish, notify, upload): each runs at most once per episode and name.

The records are `airflow_idempotent_jobs.effect`; the state machine is `ledger`. See docs/design.md,
"Effects after the payment".
"""

from __future__ import annotations

from ..effect import MAX_EFFECTS, Effect, EffectState
from ..errors import EffectInProgress, EffectInputConflict, EffectNotDone, EffectStateUnknown
from .ledger import EffectCapability, EffectLedger, EffectRun, Happened, effect_token

__all__ = [
    "MAX_EFFECTS",
    "Effect",
    "EffectCapability",
    "EffectInProgress",
    "EffectInputConflict",
    "EffectLedger",
    "EffectNotDone",
    "EffectRun",
    "EffectState",
    "EffectStateUnknown",
    "Happened",
    "effect_token",
]
