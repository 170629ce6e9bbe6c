"""Test doubles and checks for people who build on this package; importable without Airflow.

`conformance` runs a `PaidProvider` adapter through the faults that decide whether it pays twice
(`check_adapter`, `assert_conformant`), through `fault_proxy`, a fault-injecting HTTP proxy on
127.0.0.1. `server` is the local provider server the tests and `make demo` run (a JSON job API that
counts submissions per token and injects faults on request); `local_api` holds the pieces it is built
from, for a double of another API (the example adapters' servers).
"""
