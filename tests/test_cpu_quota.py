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


def test_a_v1_quota_above_the_process_cgroup_counts(tmp_path: Path) -> None:
    # A cgroup v1 host (systemd) with CPUQuota=200% on user.slice: the process's own cgroup, a session scope below
    # it, sets none; the slice's quota holds for it as v2's does.
    cpu = tmp_path / "cg" / "cpu,cpuacct"
    scope = cpu / "user.slice" / "user-1000.slice" / "session-3.scope"
    scope.mkdir(parents=True)
    for d, quota in ((cpu, "-1"), (cpu / "user.slice", "200000"), (cpu / "user.slice" / "user-1000.slice", "-1"),
                     (scope, "-1")):
        (d / "cpu.cfs_quota_us").write_text(quota + "\n")
        (d / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("4:memory:/user.slice/user-1000.slice/session-3.scope\n"
                    "2:cpu,cpuacct:/user.slice/user-1000.slice/session-3.scope\n1:name=systemd:/user.slice\n0::/\n")
    assert cgroup_cpu_limit(str(tmp_path / "cg"), str(proc)) == 2
    # A container's view: its own cgroup is the root of the mount, and /proc/self/cgroup names the host's path.
    box = tmp_path / "box" / "cpu,cpuacct"
    box.mkdir(parents=True)
    (box / "cpu.cfs_quota_us").write_text("100000\n")
    (box / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("2:cpu,cpuacct:/docker/0123abcd\n0::/\n")
    assert cgroup_cpu_limit(str(tmp_path / "box"), str(proc)) == 1
