"""``python -m airflow_idempotent_jobs``: the same as the ``idempotent-jobs`` command."""

from __future__ import annotations

import sys

from .command import main

sys.exit(main())
