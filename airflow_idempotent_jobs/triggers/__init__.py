"""Triggers run by Airflow's triggerer (deferrable operators)."""

from __future__ import annotations
