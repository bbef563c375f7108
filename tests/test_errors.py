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


def test_a_numeric_setting_of_the_environment_is_read_or_refused_in_one_line(monkeypatch) -> None:
    from cabal.config import environment_number

    monkeypatch.delenv("CABAL_TEST_NUMBER", raising=False)
    assert environment_number("CABAL_TEST_NUMBER", 15, what="minutes") == 15
    monkeypatch.setenv("CABAL_TEST_NUMBER", " 2.5 ")
    assert environment_number("CABAL_TEST_NUMBER", 15, what="minutes") == 2.5
    for text, whole, least in (("soon", False, 0), ("2.5", True, 0), ("-1", True, 0), ("0", True, 1), ("inf", False, 0)):
        monkeypatch.setenv("CABAL_TEST_NUMBER", text)
        with pytest.raises(ConfigError) as refused:
            environment_number("CABAL_TEST_NUMBER", 15, what="things", whole=whole, least=least)
        kind = "a whole number" if whole else "a number"
        assert str(refused.value) == f"CABAL_TEST_NUMBER={text!r}: write {kind} of things, {least:g} or more"
