"""Operator extra links (Airflow providers keep theirs in ``links/``): the "Episode" button."""
