"""Terminal output: emoji where the terminal can show them, ASCII otherwise.

Only decoration lives here; whether something passed is always decided by
exit codes and result objects, never by what is printed.
"""
from __future__ import annotations

import sys

_EMOJI = {"ok": "\u2705", "fail": "\u274c", "warn": "\u26a0\ufe0f ", "info": "\u2022", "plus_minus": "\u00b1"}
_ASCII = {"ok": "[OK]", "fail": "[FAIL]", "warn": "[WARN]", "info": "-", "plus_minus": "+/-"}


def _stdout_encoding() -> str:
    return getattr(sys.stdout, "encoding", None) or "ascii"


def can_show_emoji() -> bool:
    try:
        "".join(_EMOJI.values()).encode(_stdout_encoding())
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def make_output_safe() -> None:
    """Never crash on text we relay (a notebook may print emoji): replace
    what the terminal's encoding cannot show."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def mark(kind: str) -> str:
    return (_EMOJI if can_show_emoji() else _ASCII)[kind]


def status(ok: bool, message: str) -> None:
    print(f"{mark('ok' if ok else 'fail')} {message}", flush=True)


def warn(message: str) -> None:
    print(f"{mark('warn')} {message}", flush=True)


def info(message: str) -> None:
    print(f"{mark('info')} {message}", flush=True)


def heading(message: str) -> None:
    print(f"\n=== {message} ===", flush=True)


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip().splitlines())
