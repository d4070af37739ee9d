#!/usr/bin/env python3
"""Runs a command under a real pseudo-terminal, types ANSWER (and Enter)
once PROMPT has appeared in its output, and reports as one JSON line how it
ended and everything it showed: {"exit": code or null, "output": "...",
"prompted": true|false}.

    pty_answer.py TIMEOUT PROMPT ANSWER COMMAND [ARG...]

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

timeout, prompt, answer = float(sys.argv[1]), sys.argv[2], sys.argv[3]
argv = sys.argv[4:]

pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

output = ""
prompted = False
deadline = time.time() + timeout
status = None
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if data:
            output += data.decode("utf-8", "replace")
            if not prompted and prompt in output:
                prompted = True
                os.write(fd, (answer + "\n").encode())
            continue
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        break
if status is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status) if status is not None else None
print(json.dumps({"exit": code, "output": output, "prompted": prompted}))
