"""The documentation's generated reference covers the code: every operator, parameter, command and option.

``make docs`` builds the site (CI runs it); these checks keep ``make test`` from passing with a
reference page the build would refuse or that leaves something out.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from airflow_idempotent_jobs import operators
from airflow_idempotent_jobs.cli import build_parser
from docsgen import hooks, reference

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROOT = DOCS.parent


def test_every_page_with_a_generated_section_renders() -> None:
    pages = [p for p in DOCS.rglob("*.md") if "<!-- generated:" in p.read_text(encoding="utf-8")]
    assert len(pages) >= 6
    for page in pages:
        rendered = hooks.render(page.read_text(encoding="utf-8"))
        assert "<!-- generated:" not in rendered, page


def test_an_unknown_generated_section_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown generated section 'nope'"):
        hooks.render("<!-- generated: nope -->")


def test_every_public_operator_and_both_decorators_have_a_parameter_table() -> None:
    listed = {name for name, _, _ in reference.OPERATORS}
    public = {name for name in operators.__all__ if name.endswith("Operator")}
    assert public <= listed
    assert {"@task.paid_generation", "@task.episode"} <= listed
    page = (DOCS / "reference" / "operators.md").read_text(encoding="utf-8")
    for name in listed:
        assert f"<!-- generated: operator-parameters {name} -->" in page, name


def test_every_parameter_is_documented_with_its_default() -> None:
    """The table refuses a parameter without a :param docstring; the newcomer's poll_* are there."""
    table = reference.operator_parameters("PaidGenerationOperator")
    for row in ("`poll_timeout` | `3600.0`", "`poll_initial_delay` | `1.0`", "`poll_max_delay` | `30.0`"):
        assert row in table
    assert "| `request` |" not in reference.operator_parameters("@task.paid_generation")


def test_the_cli_reference_names_every_command_and_option() -> None:
    text = reference.cli_reference()
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        assert f"### `{name}`" in text, name
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in text, (name, flag)


def test_every_option_of_the_provider_config_is_documented() -> None:
    from airflow_idempotent_jobs.get_provider_info import get_provider_info

    text = reference.config_reference()
    for option in get_provider_info()["config"]["idempotent_jobs"]["options"]:
        assert f"### `{option}`" in text
        assert f"`AIRFLOW__IDEMPOTENT_JOBS__{option.upper()}`" in text


def test_every_error_class_has_its_exit_code_and_retry_behaviour() -> None:
    from airflow_idempotent_jobs import errors

    text = reference.errors_reference()
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.IdempotentJobsError):
            row = re.search(rf"^\| `{name}` \|[^|]*\| (\d) \| ([^|]+) \|", text, re.M)
            assert row is not None, name
            assert int(row.group(1)) == cls.exit_code
            assert (row.group(2).strip() == "retried") is cls.retryable, name


def test_the_documentation_url_is_where_the_site_is_published() -> None:
    documentation = re.search(r'^Documentation = "(\S+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    site_url = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert site_url is not None and documentation is not None
    assert documentation.group(1) == site_url.group(1)


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.rglob("*.md"):
        assert f": {page.relative_to(DOCS).as_posix()}" in nav, page
