"""MkDocs hook (mkdocs.yml ``hooks:``): fills each ``<!-- generated: NAME [ARG] -->`` marker of a page.

The reference pages name what they need; `docsgen.reference` reads it from the code at build time,
so ``make docs`` cannot publish a parameter, an option, a command or an exit code the code lacks.
An unknown marker fails the build.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from docsgen import reference

_MARKER: Final = re.compile(r"<!-- generated: ([a-z-]+)(?: ([^ ]+))? -->")
_GENERATORS: Final[dict[str, Callable[..., str]]] = {
    "operator-parameters": reference.operator_parameters,
    "cli": reference.cli_reference,
    "config": reference.config_reference,
    "errors": reference.errors_reference,
    "schema": reference.json_schema,
    "http-connection-fields": reference.http_connection_fields,
}


def render(markdown: str) -> str:
    """``markdown`` with every marker replaced by what it names."""

    def fill(match: re.Match[str]) -> str:
        name, arg = match.group(1), match.group(2)
        if name not in _GENERATORS:
            raise ValueError(f"unknown generated section {name!r} (known: {', '.join(sorted(_GENERATORS))})")
        return _GENERATORS[name](arg) if arg is not None else _GENERATORS[name]()

    return _MARKER.sub(fill, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
