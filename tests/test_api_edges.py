"""The public API with odd but legal input, as an integrator's runtime (or a hostile caller) hands it over."""

from __future__ import annotations

from pathlib import Path

import pytest

from symi_memory import ConfigError, open_memory


def test_agent_id_too_long_for_a_file_name_is_a_config_error(tmp_path: Path) -> None:
    # Before: sqlite's "unable to open database file" (the index file name is longer than the file system takes).
    with pytest.raises(ConfigError, match=r"agent id 'x{20}.*too long"):
        open_memory(agent_id="x" * 300, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False)
    long_ok = "é" * 64  # 128 UTF-8 bytes: the longest id taken
    with open_memory(agent_id=long_ok, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False) as m:
        assert m.sync().errors == ()
        assert Path(m.status()["dbPath"]).name == f"{long_ok}.sqlite"


def test_agent_id_that_is_not_a_string_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent id 5 must be a string"):
        open_memory(agent_id=5, workspace=tmp_path / "ws", state_dir=tmp_path / "state", start=False)  # type: ignore[arg-type]
