#!/usr/bin/env python3
"""Runs a command under a real pseudo-terminal, waits until its output
matches a pattern, types Ctrl-C (the terminal sends SIGINT to the
foreground process group, as a person's keyboard does), and reports how it
ended, as one JSON line: {"exit": code or null, "signal": n or null,
"output": "...", "matched": bool, "before": "...", "ctrl_c_at": t}:
before is the output written before Ctrl-C was typed (or null), ctrl_c_at
the time it was typed (time.monotonic(): CLOCK_MONOTONIC, the clock of
geoservices.core.monotonic), so a spec can tell a Ctrl-C that came late.

    pty_ctrl_c.py PATTERN TIMEOUT COMMAND [ARG...]

Ctrl-C comes 0.2 s after the pattern shows, or $PTY_CTRL_C_DELAY seconds
(0: at once, for a phase that lasts a fraction of a second).

The child is killed (SIGKILL, by its PID) when it does not end within
TIMEOUT seconds after Ctrl-C, or when the pattern never shows.
"""
import json
import os
import pty
import re
import select
import signal
import sys
import time

pattern = re.compile(sys.argv[1].encode())
timeout = float(sys.argv[2])
argv = sys.argv[3:]

pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

out = b""


def read_for(seconds, until=None):
    global out
    deadline = time.time() + seconds
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            out += chunk
            if until is not None and until.search(out):
                return True
    return None


def drain():
    """Reads what the command has written so far, without waiting."""
    global out
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            out += chunk
    except OSError:
        return


matched = read_for(timeout, pattern) is True
before = None
ctrl_c_at = None
if matched:
    time.sleep(float(os.environ.get("PTY_CTRL_C_DELAY", "0.2")))
    drain()  # what the command wrote before the Ctrl-C
    before = len(out)
    ctrl_c_at = time.monotonic()
    os.write(fd, b"\x03")
    read_for(timeout)
status = None
deadline = time.time() + timeout
while time.time() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
try:
    while True:
        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
except OSError:
    pass
result = {
    "matched": matched,
    "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
    "output": out.decode("utf-8", "replace"),
    "before": None if before is None else out[:before].decode("utf-8", "replace"),
    "ctrl_c_at": ctrl_c_at,
}
print(json.dumps(result))
