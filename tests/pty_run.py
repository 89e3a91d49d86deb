#!/usr/bin/env python3
"""Runs a command on a pseudo-terminal, as a person at a terminal would,
and writes what it printed (stdout and stderr together, as the terminal
shows them) to our stdout; exits with its exit status.  Bounded in time.

    python3 tests/pty_run.py SECONDS CMD [ARGS...]
"""
import os
import pty
import select
import signal
import sys
import time


def main():
    limit, argv = float(sys.argv[1]), sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    out, end = b"", time.monotonic() + limit
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
    else:
        os.kill(pid, signal.SIGKILL)
        sys.stdout.buffer.write(out + b"\npty_run: timed out\n")
        sys.exit(124)
    _, st = os.waitpid(pid, 0)
    sys.stdout.buffer.write(out)
    sys.exit(os.waitstatus_to_exitcode(st))


if __name__ == "__main__":
    main()
