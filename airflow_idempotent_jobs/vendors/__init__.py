"""Paid APIs reached through their vendors' own SDKs, each as a `PaidProvider` and a `PaidProviderHook`.

A vendor SDK is a client with retries of its own: for the call that costs money they are turned off
(`_stainless.PAID_CALL_OPTIONS`), or the API is sent a token it honours on every attempt (Bedrock's
``clientRequestToken``, so boto3 keeps its retries), and its exceptions are read as "not sent" or
"maybe sent" (`_stainless.classify`, `bedrock._botocore.classify`). `llm_batch` prices LLM batches.
Each vendor is a subpackage whose provider imports no Airflow and whose hook reads the connection
type the vendor's Airflow provider defines (``openai``, ``anthropic``, ``aws``), or ours where there
is none (``idempotent_jobs_replicate``). Which capability each vendor gets, and why:
docs/how-to/llm-batch.md, docs/how-to/media-and-cloud.md.
"""
