#!/usr/bin/env python3
"""Ctrl-C in hetero-run, typed on a terminal as a person types it.

hetero-run runs on a pseudo-terminal (Python's pty module), so the ^C
written to it reaches the program as SIGINT from its terminal, the way
llama-cli gets it.  What must hold, as llama-cli does it:
  - conversation (-cnv): a Ctrl-C mid-reply stops the reply and the prompt
    comes back; a second question is then answered; end of input exits 0;
  - a Ctrl-C at the conversation's prompt exits 130;
  - two Ctrl-C in a row mid-reply exit 130;
  - one prompt (plain mode): a Ctrl-C ends the generation, the text's line
    ends, then the timing line, and the exit status is 130.
Every step has a deadline; the transcript is printed on failure.

    python3 tests/ctrlc_check.py BUILD/hetero-run [ARGS...]
"""
import os
import pty
import select
import signal
import sys
import time

DEADLINE = 60.0


class Term:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.out = b""
        self.status = None

    def read_until(self, what, start=0, timeout=DEADLINE):
        """Reads until `what` appears at or after `start`; its offset."""
        end = time.monotonic() + timeout
        while True:
            at = self.out.find(what, start)
            if at >= 0:
                return at
            left = end - time.monotonic()
            if left <= 0 or not self._read(left):
                self.fail("waited for %r" % what)

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], min(timeout, 1.0))
        if r:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the program ended: EIO on Linux
                chunk = b""
            if not chunk:
                return False
            self.out += chunk
        return True

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout=DEADLINE):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self._read(0.2)
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.05):
                    pass
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
        self.fail("the program did not exit")

    def fail(self, why):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        sys.stdout.write("ctrlc_check: FAILED: %s\n--- transcript ---\n%s\n---\n"
                         % (why, self.out.decode("utf-8", "replace")))
        sys.exit(1)


def check(cond, term, why):
    if not cond:
        term.fail(why)


def main():
    tool, extra = sys.argv[1], sys.argv[2:]
    base = [tool, "--devices", "cpu", "-t", "2", "--temp", "0", "--ignore-eos"] + extra

    # 1. -cnv: Ctrl-C mid-reply, back to the prompt, a second question answered.
    t = Term(base + ["-cnv", "-n", "400", "-p", "first question"])
    at = t.read_until(b"> first question\r\n")
    reply_start = at + len(b"> first question\r\n")
    while len(t.out) < reply_start + 4:  # some of the reply
        t._read(1.0)
    t.send(b"\x03")
    back = t.read_until(b"\r\n> ", reply_start)
    check(b"ended: callback (Ctrl-C)" in t.out[reply_start:back + 4], t,
          "the interrupted reply's timing line says Ctrl-C")
    check(b"decode 400 tokens" not in t.out[reply_start:back], t, "the first reply was cut short")
    t.send(b"second question\n")
    second = t.read_until(b"ended: length (400 tokens, as -n asked)", back)
    t.read_until(b"\r\n> ", second)
    t.send(b"\x04")  # end of input
    check(t.wait() == 0, t, "end of input after the second answer exits 0 (got %s)" % t.status)
    first = t.out[reply_start:back].decode("utf-8", "replace")
    decoded = first[first.find("decode "):].split(" in ")[0]
    print("ctrlc_check: -cnv: Ctrl-C stopped the first reply (%s), the second question got its 400 tokens, "
          "exit 0" % decoded)
    transcript = t.out

    # 2. -cnv: Ctrl-C at the prompt exits 130.
    t = Term(base + ["-cnv", "-n", "4"])
    t.read_until(b"> ")
    t.send(b"\x03")
    check(t.wait() == 130, t, "Ctrl-C at the prompt exits 130 (got %s)" % t.status)
    print("ctrlc_check: -cnv: Ctrl-C at the prompt: exit 130")

    # 3. -cnv: two Ctrl-C mid-reply exit 130 (the second lands in the reply,
    # or at the prompt if the reply stopped first: 130 either way).
    t = Term(base + ["-cnv", "-n", "100000", "-p", "go on"])
    at = t.read_until(b"> go on\r\n") + len(b"> go on\r\n")
    while len(t.out) < at + 4:
        t._read(1.0)
    # Two signals in one instant are one: the second follows shortly.
    t.send(b"\x03")
    time.sleep(0.1)
    t.send(b"\x03")
    check(t.wait() == 130, t, "two Ctrl-C mid-reply exit 130 (got %s)" % t.status)
    print("ctrlc_check: -cnv: two Ctrl-C mid-reply: exit 130")

    # 4. Plain mode: the text's newline, the timing line, exit 130.
    t = Term(base + ["-n", "100000", "-p", "Once upon a time"])
    at = t.read_until(b"Once upon a time") + len(b"Once upon a time")
    while len(t.out) < at + 4:
        t._read(1.0)
    t.send(b"\x03")
    check(t.wait() == 130, t, "Ctrl-C in plain mode exits 130 (got %s)" % t.status)
    timing = t.out.find(b"hetero-run: prefill", at)
    check(timing > at, t, "a timing line after the text")
    check(t.out[timing - 2:timing] == b"\r\n", t, "the text's line ends before the timing line")
    check(b"ended: callback (Ctrl-C)" in t.out[timing:], t, "the timing line says Ctrl-C")
    print("ctrlc_check: plain: Ctrl-C after %d bytes of text: newline, timing line, exit 130" % (timing - at))
    sys.stdout.write("--- the -cnv transcript ---\n%s\n" % transcript.decode("utf-8", "replace"))


if __name__ == "__main__":
    main()
