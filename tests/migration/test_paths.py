"""``migrate`` paths end up in every migrated record and the manifest: text that hides or forges is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.clirun import run_cli
from tests.legacy_fixtures import make_legacy, tree


@pytest.mark.parametrize("name", ["legacy\x1b]0;pwned\x07", "legacy\nfake", "legacy\u202eevil", "legacy\x9b2J"])
@pytest.mark.parametrize("option", ["--from", "--manifest", "--key-map"])
def test_a_path_with_control_or_format_characters_is_bad_input(tmp_path: Path, name: str, option: str) -> None:
    legacy = make_legacy(tmp_path / name, bad=False)
    given = {"--from": str(legacy), "--manifest": str(tmp_path / name / "m.json"), "--key-map": str(legacy)}
    args = ["--from", str(legacy if option == "--from" else make_legacy(tmp_path / "plain", bad=False))]
    if option != "--from":
        args += [option, given[option]]
    before = tree(tmp_path)
    done = run_cli("--store", str(tmp_path / "store"), "migrate", *args, "--apply")
    assert done.code == 2, done.stderr
    line = done.error_line()
    assert option in line and "control or invisible" in line, line
    for char in ("\x1b", "\x07", "\n", "\u202e", "\x9b"):
        assert char not in line
    assert tree(tmp_path) == before
    assert not os.path.exists(tmp_path / "store")
