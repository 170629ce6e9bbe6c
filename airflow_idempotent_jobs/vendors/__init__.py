"""Paid APIs reached through their vendors' own SDKs, each as a `PaidProvider` and a `PaidProviderHook`.

A vendor SDK is a client with retries of its own: for the call that costs money they are turned off
(`_stainless.PAID_CALL_OPTIONS`), and its exceptions are read as "not sent" or "maybe sent"
(`_stainless.classify`). `llm_batch` prices LLM batches. Each vendor is a subpackage whose provider
imports no Airflow and whose hook reads the connection type the vendor's Airflow provider defines.
Which capability each vendor gets, and why: docs/how-to/llm-batch.md.
"""
