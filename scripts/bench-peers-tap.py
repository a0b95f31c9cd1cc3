#!/usr/bin/env python3
"""The agent as both tools start it in scripts/bench-peers.py: runs the real command under a
PTY of its own, relays both ways (window size included), and records every chunk with the
time it passed, so that the two tools are timed against the same independent clock. The
record is replayed through a terminal emulator afterwards (bench-peers.py, `screen_times`) to
find when the screen changed; nothing is parsed while the agent runs.

Record: a sequence of `<kind:1><ms since the epoch:8><length:4><bytes>`, kind `O` (the
agent's output), `I` (input to it) or `W` (window size: rows, columns as two u16).

Usage: bench-peers-tap.py RECORD -- COMMAND [ARG ...]
"""
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
import tty


def main():
    record_path = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1:]
    # Unbuffered: the tools end their agents with a signal, which would lose a buffer.
    record = open(record_path, "ab", buffering=0)

    def note(kind, data):
        record.write(kind + struct.pack("<QI", time.time_ns() // 1_000_000, len(data)) + data)

    def window():
        size = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8)
        note(b"W", size[:4])
        return size

    size = window()
    pid, master = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    fcntl.ioctl(master, termios.TIOCSWINSZ, size)

    def resize(*_):
        fcntl.ioctl(master, termios.TIOCSWINSZ, window())
        os.kill(pid, signal.SIGWINCH)

    signal.signal(signal.SIGWINCH, resize)
    saved = termios.tcgetattr(0)
    tty.setraw(0)
    try:
        while True:
            try:
                ready, _, _ = select.select([0, master], [], [])
            except InterruptedError:
                continue
            if 0 in ready:
                data = os.read(0, 4096)
                if not data:
                    break
                note(b"I", data)
                os.write(master, data)
            if master in ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                note(b"O", data)
                os.write(1, data)
    finally:
        termios.tcsetattr(0, termios.TCSAFLUSH, saved)
        record.close()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
