"""Test doubles and checks for people who build on this package; importable without Airflow.

`server` is the local provider server the tests and `make demo` run (a JSON job API that counts
submissions per token and injects faults on request).
"""
