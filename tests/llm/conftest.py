"""Fixtures for the model layer's tests: the fake Anthropic server and an environment aimed at it."""

from __future__ import annotations

import pytest

from .fake_anthropic import FakeAnthropic, aim_environment, fake_anthropic  # noqa: F401 - fixture re-export

DUMMY_API_KEY = "sk-ant-test-0123456789abcdef"


@pytest.fixture
def claude_env(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> FakeAnthropic:  # noqa: F811
    """ANTHROPIC_* variables aimed at the fake server, nothing that could reach a real one."""
    aim_environment(monkeypatch, fake_anthropic.url, DUMMY_API_KEY)
    return fake_anthropic
