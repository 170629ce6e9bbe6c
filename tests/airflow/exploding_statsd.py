"""A StatsD client that raises on this project's metrics (``[metrics] statsd_custom_client_path``).

It first sends ``exploded.<name>`` so the test sees that the operators did try to emit; Airflow's
own metrics pass untouched, so only the project's emission is under test.
"""

from __future__ import annotations

from typing import Any

from statsd import StatsClient  # type: ignore[import-untyped]


class ExplodingStatsClient(StatsClient):  # type: ignore[misc]
    def incr(self, stat: str, count: Any = 1, rate: float = 1) -> None:
        if stat.startswith("idempotent_jobs."):
            super().incr(f"exploded.{stat}", 1, rate)
            raise RuntimeError(f"metrics backend down ({stat})")
        super().incr(stat, count, rate)
