"""``--store``: which texts name a store, and that every other one is bad input that creates nothing.

A ``file:`` URL that names no absolute local path (``file://``, ``file://localhost``,
``file:relative``) must not open a store in the current directory; a URL ``urlsplit`` cannot parse
or whose path decodes to a NUL is bad input, never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import InvalidConfiguration
from tests.clirun import Result, run_cli, run_main

#: (store text, what the one error line must mention); ``{tmp}`` is a fresh absolute directory.
BAD_STORES = [
    ("file://", "file:"),
    ("file://localhost", "file:"),
    ("FILE://", "file:"),
    ("file:", "file:"),
    ("file:relative", "relative"),
    ("file:./jobs", "relative"),
    ("file://./jobs", "local"),
    ("file://jobs", "local"),
    ("file://example.org{tmp}/x", "local"),
    ("file://user@localhost{tmp}/x", "local"),
    ("file://{tmp}/a%00b", "NUL"),
    ("file://{tmp}/a%0ab", "control"),
    ("file://{tmp}/a%1b[31mb", "control"),
    ("file://{tmp}/a%ffb", "UTF-8"),
    ("file://{tmp}/a%zzb", "percent"),
    ("file://{tmp}/a%4", "percent"),
    ("file://{tmp}/a?b=1", "query"),
    ("file://{tmp}/a#b", "fragment"),
    ("{tmp}/a\x1bb", "control"),
    ("{tmp}/a\u202eb", "control"),
    (" {tmp}/a", "whitespace"),
    ("{tmp}/a ", "whitespace"),
    ("postgresql://[::1/x", "postgresql"),
    ("postgresql:relative", "postgresql"),
    ("file://[::1{tmp}/x", "file"),
    ("http://example.org/store", "scheme"),
    ("jobs://{tmp}/x", "scheme"),
]


def _refused(done: Result) -> str:
    assert done.code == 2, (done.code, done.stdout, done.stderr)
    assert done.stdout == ""
    return done.error_line()


@pytest.mark.parametrize(("text", "mention"), BAD_STORES, ids=lambda v: repr(v)[:30])
def test_a_store_text_that_names_no_absolute_local_path_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, mention: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    store = text.replace("{tmp}", str(tmp_path))
    with pytest.raises(InvalidConfiguration):
        open_store(store)
    line = _refused(run_main("--store", store, "allocate", "--week", "2026-W32", "--key", "k"))
    assert mention.lower() in line.lower(), line
    assert "\x1b" not in line and "\u202e" not in line
    assert sorted(os.listdir(tmp_path)) == ["cwd"]
    assert os.listdir(cwd) == []


@pytest.mark.parametrize("text", ["file://", "file://localhost", "file:relative", "file:///{tmp}/a%00b"])
def test_the_command_refuses_them_in_its_own_process_and_in_the_environment(tmp_path: Path, text: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    store = text.replace("/{tmp}", str(tmp_path))
    _refused(run_cli("--store", store, "allocate", "--week", "2026-W32", "--key", "k", cwd=cwd))
    _refused(run_cli("list", env={"IDEMPOTENT_JOBS_STORE": store}, cwd=cwd))
    assert sorted(os.listdir(tmp_path)) == ["cwd"]
    assert os.listdir(cwd) == []


def test_an_unparsable_postgresql_url_is_one_line_and_never_shows_its_password(tmp_path: Path) -> None:
    for url in ("postgresql://u:s3cr3t@[::1/x", "mysql://u:s3cr3t@db/jobs", "postgres://u:s3cr3t@[zz]:5432/x"):
        line = _refused(run_cli("--store", url, "list", cwd=tmp_path))
        assert "s3cr3t" not in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("file://{tmp}/s1", "s1"),
        ("file://localhost{tmp}/s2", "s2"),
        ("FILE://LOCALHOST{tmp}/s3", "s3"),
        ("file:{tmp}/s4", "s4"),
        ("file://{tmp}/with%20space", "with space"),
        ("file://{tmp}/caf%C3%A9", "café"),
        ("{tmp}/plain", "plain"),
        ("{tmp}/odd:name", "odd:name"),
    ],
)
def test_an_absolute_file_url_or_a_path_opens_exactly_that_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a URL misread as a relative path would land here, and show
    store = text.replace("{tmp}", str(tmp_path))
    done = run_main("--store", store, "allocate", "--week", "2026-W32", "--key", "k")
    assert (done.code, done.stdout) == (0, "2026-W32-0\n"), done.stderr
    assert os.listdir(tmp_path) == [where]
    assert (tmp_path / where / "store.json").is_file()


def test_a_relative_path_is_relative_to_the_current_directory(tmp_path: Path) -> None:
    done = run_cli("--store", "jobs", "allocate", "--week", "2026-W32", "--key", "k", cwd=tmp_path)
    assert (done.code, done.stdout) == (0, "2026-W32-0\n"), done.stderr
    assert (tmp_path / "jobs" / "store.json").is_file()


#: Texts that name the file-system root itself: ``file:///$DIR`` or ``/$DIR`` with an empty variable.
ROOT_STORES = ["file:///", "file://localhost/", "file:////", "file:/", "/", "//", "/./", "{tmp}/to-root"]


@pytest.mark.parametrize("text", ROOT_STORES)
def test_a_store_at_the_file_system_root_is_bad_input_and_creates_nothing(tmp_path: Path, text: str) -> None:
    """``file:///`` must not open a store at ``/`` (store.json, .lock, episodes/ and index/ beside /etc)."""
    (tmp_path / "to-root").symlink_to("/")
    store = text.replace("{tmp}", str(tmp_path))
    # In this process first: on a build without the check this fails before anything is created at /.
    with pytest.raises(InvalidConfiguration, match="root"):
        open_store(store)
    for command in (["allocate", "--week", "2026-W32", "--key", "k"], ["list"], ["check"]):
        line = _refused(run_cli("--store", store, *command, cwd=tmp_path))
        assert "root" in line, line
    assert not os.path.lexists("/store.json") and not os.path.lexists("/.lock")
    assert sorted(os.listdir(tmp_path)) == ["to-root"]
