"""The reference pages' generated parts, read from the code so that they cannot drift from it.

Each function returns Markdown. The operators' tables come from their ``__init__`` signatures and
``:param`` docstrings, the CLI from its argparse parser, the options from the provider info, the
errors from their classes' ``exit_code`` and ``retryable``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "OPERATORS",
    "cli_reference",
    "config_reference",
    "errors_reference",
    "http_connection_fields",
    "json_schema",
    "operator_parameters",
    "parameter_docs",
    "parameters",
]

#: The public operators and decorators, with the class whose parameters each takes.
OPERATORS: Final = (
    ("AllocateEpisodeOperator", "airflow_idempotent_jobs.operators.allocate", "AllocateEpisodeOperator"),
    ("PaidGenerationOperator", "airflow_idempotent_jobs.operators.paid_generation", "PaidGenerationOperator"),
    ("@task.paid_generation", "airflow_idempotent_jobs.decorators.paid_generation", "_PaidGenerationDecoratedOperator"),
    ("ApproveEpisodeOperator", "airflow_idempotent_jobs.operators.approve", "ApproveEpisodeOperator"),
    ("EpisodeEffectOperator", "airflow_idempotent_jobs.operators.effect", "EpisodeEffectOperator"),
    ("@task.episode", "airflow_idempotent_jobs.decorators.episode", "_EpisodeDecoratedOperator"),
    ("CheckEpisodesOperator", "airflow_idempotent_jobs.operators.check_episodes", "CheckEpisodesOperator"),
)

#: Parameters a decorator does not take from its operator: ``@task``'s own (Airflow documents them),
#: and the request, which ``@task.paid_generation``'s function returns.
_NOT_DECORATOR_PARAMETERS: Final = frozenset({"python_callable", "op_args", "op_kwargs", "request"})
_PACKAGE: Final = "airflow_idempotent_jobs"
_PARAM: Final = re.compile(r"^\s*:param (\w+):(.*?)(?=^\s*:param |\Z)", re.M | re.S)
SCHEMAS: Final = Path(__file__).resolve().parents[1] / "docs" / "reference" / "schemas"


def _operator_class(module: str, name: str) -> type:
    import importlib

    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def parameters(cls: type) -> list[inspect.Parameter]:
    """The keyword parameters this package's classes in ``cls``'s MRO add, subclass first."""
    seen: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith(_PACKAGE) or "__init__" not in vars(klass):
            continue
        for param in inspect.signature(vars(klass)["__init__"]).parameters.values():
            if param.name == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            seen.setdefault(param.name, param)
    decorator = cls.__name__.startswith("_")
    return [p for name, p in seen.items() if not (decorator and name in _NOT_DECORATOR_PARAMETERS)]


def parameter_docs(cls: type) -> dict[str, str]:
    """Each ``:param name:`` of this package's classes in ``cls``'s MRO, the subclass's text winning."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith(_PACKAGE):
            for match in _PARAM.finditer(inspect.getdoc(klass) or ""):
                docs[match.group(1)] = " ".join(match.group(2).split())
    return docs


def _cell(text: str) -> str:
    """One table cell: reStructuredText's double backticks as Markdown's, no pipe or line break."""
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|").replace("\n", " ")


def _default(param: inspect.Parameter) -> str:
    if param.default is inspect.Parameter.empty:
        return "required"
    return f"`{param.default!r}`"


def operator_parameters(title: str) -> str:
    """The parameter table of one operator or decorator (``title`` as in `OPERATORS`)."""
    for name, module, cls_name in OPERATORS:
        if name == title:
            cls = _operator_class(module, cls_name)
            break
    else:
        raise KeyError(f"no operator or decorator {title!r} in docsgen.reference.OPERATORS")
    docs = parameter_docs(cls)
    templated = set(getattr(cls, "template_fields", ()))
    rows = ["| parameter | default | templated | meaning |", "|---|---|---|---|"]
    for param in parameters(cls):
        if param.name not in docs:
            raise ValueError(f"{cls.__module__}.{cls.__name__}: parameter {param.name!r} has no :param docstring")
        mark = "yes" if param.name in templated else ""
        rows.append(f"| `{param.name}` | {_default(param)} | {mark} | {_cell(docs[param.name])} |")
    return "\n".join(rows)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            flags = ", ".join(action.option_strings)
            if action.nargs != 0:
                flags += f" {action.metavar or action.dest.upper()}"
        else:
            flags = str(action.metavar or action.dest)
            if action.nargs in ("*", "+"):
                flags += " ..."
        text = action.help or ""
        if action.required and action.option_strings:
            text = f"(required) {text}"
        rows.append(f"| `{_cell(flags)}` | {_cell(text)} |")
    return rows if len(rows) > 2 else []


def cli_reference() -> str:
    """Every command of ``idempotent-jobs`` with its usage and arguments, from the parser itself."""
    from airflow_idempotent_jobs.cli import build_parser

    parser = build_parser()
    out = ["### Global options", "", f"`{' '.join(parser.format_usage().split()[1:])}`", "", *_options(parser)]
    for name, sub, text in _subcommands(parser):
        usage = " ".join(sub.format_usage().split()[1:])
        out += ["", f"### `{name}`", "", text or (sub.description or ""), "", "```", usage, "```", ""]
        out += _options(sub)
    return "\n".join(out) + "\n"


def config_reference() -> str:
    """The ``[idempotent_jobs]`` options as the provider info declares them to Airflow."""
    from airflow_idempotent_jobs.get_provider_info import get_provider_info

    out: list[str] = []
    for section, spec in get_provider_info()["config"].items():
        out += [f"Section `[{section}]`: {' '.join(spec['description'].split())}", ""]
        for option, meta in spec["options"].items():
            env = f"AIRFLOW__{section.upper()}__{option.upper()}"
            out += [f"### `{option}`", "", " ".join(meta["description"].split()), ""]
            out += [
                "| | |",
                "|---|---|",
                f"| environment variable | `{env}`"
                + (f" (also `{env}_SECRET` / `{env}_CMD`)" if meta.get("sensitive") else "")
                + " |",
                f"| type | `{meta['type']}` |",
                f"| default | {'`' + meta['default'] + '`' if meta.get('default') else 'not set'} |",
                f"| example | `{meta.get('example', '')}` |",
                f"| sensitive | {'yes: Airflow hides its value' if meta.get('sensitive') else 'no'} |",
                f"| added in | {meta['version_added']} |",
                "",
            ]
    return "\n".join(out)


def _error_classes() -> list[type[BaseException]]:
    from airflow_idempotent_jobs import errors

    root = errors.IdempotentJobsError
    found: list[type[BaseException]] = []

    def walk(cls: type[BaseException]) -> None:
        found.append(cls)
        for sub in sorted(cls.__subclasses__(), key=lambda c: c.__name__):
            if sub.__module__ == errors.__name__ and sub not in found:
                walk(sub)

    walk(root)
    return found


def errors_reference() -> str:
    """Every error class: its parent, the CLI's exit code, and what a failed Airflow task does."""
    rows = [
        "| error | is a | exit code | in a task | means |",
        "|---|---|---|---|---|",
    ]
    for cls in _error_classes():
        parents = ", ".join(f"`{b.__name__}`" for b in cls.__bases__ if b is not Exception)
        retry = "retried" if getattr(cls, "retryable", True) else "fails without retry (`AirflowFailException`)"
        summary = (inspect.getdoc(cls) or "").split("\n\n")[0]
        code = cls.exit_code  # type: ignore[attr-defined]
        rows.append(f"| `{cls.__name__}` | {parents} | {code} | {retry} | {_cell(' '.join(summary.split()))} |")
    return "\n".join(rows)


def json_schema(name: str) -> str:
    """A JSON Schema of docs/reference/schemas/, checked to be JSON, as a code block."""
    text = (SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")
    json.loads(text)
    return f"```json\n{text.rstrip()}\n```"


#: What each extra field of an ``idempotent_jobs_http`` connection accepts (the defaults are read
#: from `HttpProviderConfig`; a field added there and not here fails the build).
_HTTP_FIELDS: Final = {
    "base_url": (
        "the connection's host (not an extra): `https://` unless it names a scheme; a URI's port and path are added"
    ),
    "submit_path": "a path starting with `/`, no placeholder",
    "submit_method": "`POST` or `PUT`",
    "status_path": "a path with `{remote_ref}` and nothing else in braces",
    "idempotency_header": "a header name, or null if the API has none (capability (a) needs one that is sent)",
    "tokens_honoured": "boolean: the API returns the existing job for a repeated token (capability (a))",
    "lookup_path": "a path with `{token}` and nothing else in braces (capability (b)); null: no lookup",
    "lookup_ref_path": "dotted JSON path of the job id in a lookup's answer; null: `ref_path`",
    "lookup_no_job_status": 'the HTTP status of the API\'s "no job for this token" (2xx or 4xx, not 408/409/425/429)',
    "lookup_no_job_path": 'dotted JSON path that the "no job" answer carries',
    "lookup_no_job_value": "the text at that path, or null for an empty list",
    "ref_path": "dotted JSON path of the job id in the submit answer (`data.id`, `items.0.id`)",
    "state_path": "dotted JSON path of the job's state in a status answer",
    "cost_path": "dotted JSON path of the job's cost (a finite number >= 0); null: no cost",
    "result_path": "dotted JSON path of the job's result; null: none kept",
    "error_path": "dotted JSON path of a failed job's message",
    "state_map": "an object of texts: the API's state words to `pending`, `running`, `succeeded`, `failed`",
    "connect_timeout": "seconds, above 0, at most 300",
    "read_timeout": "seconds, above 0, at most 3600",
    "connect_retries": "0 to 10: retries of a request that certainly did not reach the server",
    "backoff_initial": "0 to 60 seconds before the first such retry",
    "backoff_max": "0 to 600 seconds between such retries",
    "headers": (
        "an object of texts; never the auth, idempotency, Host or framing headers;"
        " not secret (put credentials in the password)"
    ),
}


def http_connection_fields() -> str:
    """The ``idempotent_jobs_http`` connection's fields with their defaults, from `HttpProviderConfig`."""
    import dataclasses

    from airflow_idempotent_jobs.paid._http_config import HttpProviderConfig

    fields = dataclasses.fields(HttpProviderConfig)
    names = [f.name for f in fields]
    if set(names) != set(_HTTP_FIELDS):
        raise ValueError(f"HttpProviderConfig's fields and docsgen's differ: {sorted(set(names) ^ set(_HTTP_FIELDS))}")
    rows = ["| field | default | accepts |", "|---|---|---|"]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            default = f"`{json.dumps(f.default)}`"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"`{json.dumps(f.default_factory())}`"
        else:
            default = "required"
        rows.append(f"| `{f.name}` | {default} | {_cell(_HTTP_FIELDS[f.name])} |")
    return "\n".join(rows)
