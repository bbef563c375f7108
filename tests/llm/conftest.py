"""Fixtures for the model layer's tests: the fake Anthropic server and an environment aimed at it."""

from __future__ import annotations

import pytest

from .fake_anthropic import FakeAnthropic, fake_anthropic  # noqa: F401 - fixture re-export

DUMMY_API_KEY = "sk-ant-test-0123456789abcdef"


@pytest.fixture
def claude_env(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> FakeAnthropic:  # noqa: F811
    """ANTHROPIC_* variables aimed at the fake server, nothing that could reach a real one."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    for name in ("ANTHROPIC_API_URL", "ANTHROPIC_AUTH_TOKEN", "LANGSMITH_GATEWAY", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(name, raising=False)
    return fake_anthropic
