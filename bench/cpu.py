#!/usr/bin/env python3
"""CPU seconds used by a process, its reaped children, and every process still running below it."""
import os
import sys

def stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()

def main() -> None:
    root = int(sys.argv[1])
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = int(stat(int(name))[1])
            except (OSError, IndexError, ValueError):
                pass
    def below(pid: int) -> bool:
        while pid in parents and parents[pid] != 0:
            pid = parents[pid]
            if pid == root:
                return True
        return False
    ticks = 0
    for pid in [root] + [p for p in parents if below(p)]:
        try:
            f = stat(pid)
        except OSError:
            continue
        # utime, stime, cutime, cstime (fields 14-17 of the whole line)
        ticks += sum(int(x) for x in f[11:15])
    print(ticks / os.sysconf("SC_CLK_TCK"))

if __name__ == "__main__":
    main()
