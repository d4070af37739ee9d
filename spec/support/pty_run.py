#!/usr/bin/env python3
"""Runs a command under a real pseudo-terminal to its end and reports, as
one JSON line, how it ended and what it showed when:
{"exit": code or null, "output": "...", "chunks": [[seconds, "text"], ...]}
(seconds since the start at which each piece of output arrived), so a spec
can tell a display that keeps moving from one that redraws only on events.

    pty_run.py TIMEOUT COMMAND [ARG...]

The child is killed (SIGKILL, by its PID) when it has not ended after
TIMEOUT seconds.
"""
import json
import os
import pty
import select
import signal
import sys
import time

timeout = float(sys.argv[1])
argv = sys.argv[2:]

start = time.time()
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

chunks = []
deadline = start + timeout
status = None
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if data:
            chunks.append([round(time.time() - start, 3), data.decode("utf-8", "replace")])
            continue
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        break
if status is None:
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
print(json.dumps({
    "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    "output": "".join(c[1] for c in chunks),
    "chunks": chunks,
}))
