"""Hooks: a task's store arguments or a Connection become an episode store; a Connection, a paid-provider client.

Import the hook modules themselves (``hooks.store``, ``hooks.http_provider``); this package module
stays free of Airflow imports so that ``get_provider_info`` can read the form metadata cheaply.
"""

from __future__ import annotations
