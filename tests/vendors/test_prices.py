"""The LLM batch price table: bad prices refused naming where, a missing model refused before sending,
the worst case an upper bound of every cost the same requests can report."""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.vendors.llm_batch import PriceTable, RequestBound, Usage

PRICES = {
    "gpt-5-mini": {"input": 0.125, "output": 1.0, "cached_input": 0.0125},
    "claude-haiku": {"input": 0.5, "output": 2.5, "cached_input": 0.05, "cache_write": 0.625},
}


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({}, "prices"),
        ([], "prices"),
        ({"m": {"input": 1}}, "m"),
        ({"m": {"output": 1}}, "m"),
        ({"m": {"input": 1, "output": 1, "outptu": 2}}, "m"),
        ({"m": {"input": -1, "output": 1}}, "m.input"),
        ({"m": {"input": -0.0, "output": 1}}, "m.input"),
        ({"m": {"input": 1, "output": float("nan")}}, "m.output"),
        ({"m": {"input": 1, "output": 1e999}}, "m.output"),
        ({"m": {"input": "1", "output": 1}}, "m.input"),
        ({"m": {"input": True, "output": 1}}, "m.input"),
        ({"m": {"input": 1, "output": 1, "cached_input": -2}}, "m.cached_input"),
        ({"": {"input": 1, "output": 1}}, "prices"),
        ({"m": 3}, "m"),
    ],
)
def test_a_bad_table_is_refused_naming_the_model_and_price(raw: Any, where: str) -> None:
    with pytest.raises(InvalidConfiguration) as caught:
        PriceTable.parse(raw)
    assert caught.value.field == where
    assert "\n" not in str(caught.value)


def test_a_model_without_prices_fails_before_anything_is_priced() -> None:
    table = PriceTable.parse(PRICES)
    with pytest.raises(InvalidConfiguration, match="'gpt-6' is not in the price table"):
        table.require(["gpt-5-mini", "gpt-6"])
    with pytest.raises(InvalidConfiguration):
        table.worst_case([RequestBound("gpt-6", 10, 10)])
    with pytest.raises(InvalidConfiguration):
        table.cost({"gpt-6": Usage(input_tokens=1)})


def test_cost_is_usage_times_prices_per_million() -> None:
    table = PriceTable.parse(PRICES)
    usage = {
        "gpt-5-mini": Usage(input_tokens=1_000_000, cached_input_tokens=2_000_000, output_tokens=500_000),
        "claude-haiku": Usage(input_tokens=100, cache_write_tokens=1_000, output_tokens=10),
    }
    expected = (0.125 + 2 * 0.0125 + 0.5) + (100 * 0.5 + 1_000 * 0.625 + 10 * 2.5) / 1e6
    assert math.isclose(table.cost(usage), expected)
    # A cache price left out is the input price.
    plain = PriceTable.parse({"m": {"input": 2, "output": 4}})
    assert math.isclose(plain.cost({"m": Usage(cached_input_tokens=10, cache_write_tokens=10)}), 40 / 1e6)


def test_the_worst_case_bounds_any_usage_the_same_requests_can_report() -> None:
    table = PriceTable.parse(PRICES)
    bounds = [RequestBound("gpt-5-mini", 400, 100), RequestBound("claude-haiku", 300, 50)]
    worst = table.worst_case(bounds)
    assert math.isclose(worst, (400 * 0.125 + 100 * 1.0) / 1e6 + (300 * 0.625 + 50 * 2.5) / 1e6)
    # Any split of at most input_bytes input tokens and max_tokens output tokens costs no more.
    for split in range(0, 401, 50):
        usage = {
            "gpt-5-mini": Usage(input_tokens=split, cached_input_tokens=400 - split, output_tokens=100),
            "claude-haiku": Usage(input_tokens=0, cache_write_tokens=300, output_tokens=50),
        }
        assert table.cost(usage) <= worst + 1e-15


def test_the_table_round_trips_through_json_data() -> None:
    table = PriceTable.parse(PRICES)
    assert PriceTable.parse(table.to_dict()) == table
    assert PriceTable.parse(table) is table
