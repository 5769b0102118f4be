#!/usr/bin/env python3
"""CPU seconds of a process's threads so far, by what they run (a JSON object): the HTTP API's
runtime, the background runtime (the workers, their calls and connections, the scheduler), the
extraction pool and the embedded database's writer and checkpointer."""
import json
import os
import sys

GROUPS = [
    ("sarvcrawl-work-", "extraction"),
    ("sarvcrawl-backg", "background"),
    ("sarvcrawl-write", "database"),
    ("sarvcrawl-check", "database"),
]


def group(name: str) -> str:
    for prefix, g in GROUPS:
        if name.startswith(prefix):
            return g
    return "API"


def main() -> None:
    pid = sys.argv[1]
    seconds = {g: 0.0 for g in ["extraction", "background", "database", "API"]}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            # Nanoseconds on a CPU: exact, where the clock ticks of `stat` round each thread's
            # figures down to 10 ms.
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        seconds[group(name)] += ns / 1e9
    print(json.dumps(seconds))


if __name__ == "__main__":
    main()
