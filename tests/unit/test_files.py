"""Private files are written whole, with mode 0600, through a temporary file of their own."""

from __future__ import annotations

import stat
from pathlib import Path

from courier import files


def test_a_private_file_is_replaced_whole_and_readable_by_its_owner_only(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_text("old")
    target.chmod(0o644)
    files.write_private(target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]  # no temporary file left


def test_a_file_planted_at_the_old_predictable_name_is_neither_used_nor_followed(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched")
    (tmp_path / ".secret.1234").symlink_to(elsewhere)
    files.write_private(tmp_path / "secret", "new")
    assert elsewhere.read_text() == "untouched"
    assert (tmp_path / "secret").read_text() == "new"
