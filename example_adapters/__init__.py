"""Two example adapters for paid APIs that do not fit `HttpProviderConfig`, and local servers shaped like them.

* `prediction_style`: one call per job (``POST /v1/predictions``), no idempotency header; the job
  echoes the client's ``metadata``, and ``GET /v1/predictions?metadata.token=T`` lists the jobs
  carrying a token: capability (b), lookup by listing.
* `batch_style`: two calls per job, a free upload (``POST /v1/files``) and the paid
  ``POST /v1/batches``; batches carry ``metadata`` too and are listed by it.

Each module holds a `PaidProvider` (constructible from a base URL and an API token) and a hook for
``PaidGenerationOperator(provider_hook=...)``. `prediction_api` and `batch_api` are the local servers
(real HTTP on 127.0.0.1, with fault switches) that the tests and the demo run them against:
``python -m example_adapters.prediction_api --port 0`` prints its URL.

Nothing is imported here: the servers need no Airflow, the hooks need it only when used.
"""
