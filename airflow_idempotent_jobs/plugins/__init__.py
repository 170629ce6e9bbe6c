"""The provider's page in Airflow's own UI: a FastAPI app the api-server mounts at ``/idempotent-jobs``.

Airflow-side code: it reads the store the ``[idempotent_jobs]`` section names through the core's
read model (`airflow_idempotent_jobs.operations`); its one write is settling an unknown paid
submission through the ledger (`page_settle`).
"""
