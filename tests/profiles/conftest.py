"""Fixtures for the profile-reader tests; the builders live in profile_builders.py."""

from __future__ import annotations

import pytest
from profile_builders import gpu_trace_events


@pytest.fixture
def gpu_events() -> list[dict]:
    return gpu_trace_events()
