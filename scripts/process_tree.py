"""Peak memory and CPU time of a command and every process it starts, for the benchmark scripts.

A pool worker's own ``ru_maxrss`` counts the pages it shares with its parent, and
``RUSAGE_CHILDREN`` gives only the largest reaped process; the per-process peak a memory
target is about comes from polling ``VmHWM`` over the live process tree instead. ``VmHWM``
counts the pages of files a process maps (``mmap``) that it has touched, which the kernel may
drop at will; the largest ``RssAnon`` seen at a poll (a process's own memory: heap, buffers) is
kept beside it, so a peak made of mapped file pages shows as such.
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def tree_peaks(root: int) -> dict[int, tuple[int, str, int]]:
    """Every live process under ``root`` (itself included): its peak RSS so far in KB, its command line,
    and its anonymous RSS now in KB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: dict[int, tuple[int, str, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as f:
                status = {line.split(":")[0]: line.split()[1] for line in f if line.startswith(("VmHWM", "RssAnon"))}
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found[pid] = (int(status.get("VmHWM", 0)), command, int(status.get("RssAnon", 0)))
    return found


def measured(command: list[str], every: float = 0.05) -> dict[str, Any]:
    """Run ``command``; its wall time, the CPU seconds (user + system) of it and every process it
    started and reaped, and the peak RSS of it and of its largest descendant (MB); ``anon_mb``, the
    largest anonymous RSS any of its processes had at a poll."""
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    inherited = os.environ.get("PYTHONPATH")  # kept after ROOT: a copy of scripts/ run against a checkout on the path
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *([inherited] if inherited else [])]))
    with tempfile.TemporaryFile("w+") as log:  # not a pipe: a child writing more than it holds would stall
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, env=environment, cwd=ROOT)
        peaks: dict[int, tuple[int, str]] = {}
        anon = 0
        while process.poll() is None:
            for pid, (peak, cmd, now) in tree_peaks(process.pid).items():
                if peak >= peaks.get(pid, (0, ""))[0]:
                    peaks[pid] = (peak, cmd)
                anon = max(anon, now)
            time.sleep(every)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log.seek(0)
        output = log.read()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    parent = peaks.pop(process.pid, (0, ""))[0]
    others = sorted((round(p / 1024) for p, _ in peaks.values()), reverse=True)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "parent_mb": parent / 1024,
        "child_mb": max(others, default=0),
        "children_mb": others,
        "anon_mb": anon / 1024,
        "output": output,
    }
