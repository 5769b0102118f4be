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
    seconds = {g: 0.0 for g in ["API", "background", "extraction", "database"]}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                line = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = line[line.index("(") + 1 : line.rindex(")")]
        utime, stime = line.rsplit(")", 1)[1].split()[11:13]
        seconds[group(name)] += (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")
    print(json.dumps(seconds))


if __name__ == "__main__":
    main()
