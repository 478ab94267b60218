"""The CPUs a process may use count its cgroup's CPU quota (a container given 1 CPU of a many-core host sees every
core in its affinity mask): the split scan and the scan worker's hand-off go by that count."""

from __future__ import annotations

import os
from pathlib import Path

from symi_memory.index.vectors import cgroup_cpu_limit, usable_cpus


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _v2(tmp_path: Path, own: str, limits: dict[str, str]) -> tuple[str, str]:
    root = tmp_path / "cg"
    for rel, value in limits.items():
        d = root / rel if rel else root
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpu.max").write_text(value + "\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text(f"0::{own}\n")
    return str(root), str(proc)


def test_a_v2_quota_of_one_cpu_counts_one(tmp_path: Path) -> None:
    root, proc = _v2(tmp_path, "/", {"": "100000 100000"})
    assert cgroup_cpu_limit(root, proc) == 1
    assert usable_cpus(root, proc) == 1


def test_the_tightest_quota_from_the_process_cgroup_up_to_the_root_holds(tmp_path: Path) -> None:
    root, proc = _v2(tmp_path, "/system.slice/agent.service",
                     {"": "max 100000", "system.slice": "150000 100000", "system.slice/agent.service": "max 100000"})
    assert cgroup_cpu_limit(root, proc) == 2  # 1.5 CPUs of quota: two may run at once, part of the time
    root, proc = _v2(tmp_path / "b", "/a/b", {"a": "400000 100000", "a/b": "50000 100000"})
    assert cgroup_cpu_limit(root, proc) == 1


def test_no_quota_leaves_the_affinity_count(tmp_path: Path) -> None:
    root, proc = _v2(tmp_path, "/", {"": "max 100000"})
    assert cgroup_cpu_limit(root, proc) is None
    assert usable_cpus(root, proc) == _affinity()
    # No cgroup file system, an unreadable or malformed file: as without a quota.
    assert usable_cpus(str(tmp_path / "none"), str(tmp_path / "no-proc-file")) == _affinity()
    root, proc = _v2(tmp_path / "bad", "/", {"": "lots 100000"})
    assert cgroup_cpu_limit(root, proc) is None


def test_a_v1_cfs_quota_counts(tmp_path: Path) -> None:
    cpu = tmp_path / "cg" / "cpu,cpuacct"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("250000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("4:memory:/x\n2:cpu,cpuacct:/\n0::/\n")
    assert cgroup_cpu_limit(str(tmp_path / "cg"), str(proc)) == 3
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(str(tmp_path / "cg"), str(proc)) is None
