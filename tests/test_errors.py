"""The one-line errors that name what exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from cabal.errors import ConfigError, ResourceNotFound
from cabal.membrane import Membrane


def test_known_names_come_alphabetically_or_closest_first() -> None:
    known = ["m-launch-plan-0b1c2d", "m-vector-db-study-9f9f9f", "m-launch-plan-a2c429", "m-readme-intro-111111"]

    assert str(ResourceNotFound("mission", "m-launch-plan-a2c428", known=known)) == (
        "mission not found: 'm-launch-plan-a2c428' (known: m-launch-plan-0b1c2d, m-launch-plan-a2c429, "
        "m-readme-intro-111111, m-vector-db-study-9f9f9f)")
    many = [f"m-study-{n:06x}" for n in range(30)]
    assert str(ResourceNotFound("mission", "m-study-00001c", known=many, closest_first=True)).startswith(
        "mission not found: 'm-study-00001c' (known: m-study-00001c, ")
    assert str(ResourceNotFound("mission", "x", known=many, closest_first=True)).endswith(" and 20 more)")
    assert str(ResourceNotFound("mission", "m-launch-plan-a2c428", known=known, closest_first=True)) == (
        "mission not found: 'm-launch-plan-a2c428' (known: m-launch-plan-a2c429, m-launch-plan-0b1c2d, "
        "m-readme-intro-111111, m-vector-db-study-9f9f9f)")


def test_a_protocol_folder_that_does_not_exist_is_an_error(graph, tmp_path: Path) -> None:
    (tmp_path / "a-file.yaml").write_text("protocol: x\n")

    with pytest.raises(ConfigError, match="^protocols folder not found: my_protocols$"):
        Membrane(graph, protocol_dirs=["my_protocols"])
    with pytest.raises(ConfigError, match=r"^protocols folder not found: .*a-file\.yaml \(it is a file\)$"):
        Membrane(graph, protocol_dirs=[tmp_path / "a-file.yaml"])
    assert Membrane(graph, protocol_dirs=[tmp_path]).library.exists("add_invariant")
