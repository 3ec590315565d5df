"""Java ``.properties`` syntax: ``key=value``, ``key: value`` or ``key value``; ``#``/``!``
comments; backslash line continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``)."""

from __future__ import annotations

from pathlib import Path

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def load_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text into a dict (later keys win)."""
    logical: list[str] = []
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line continues when it ends with an odd number of backslashes
        stripped = line
        n = len(stripped) - len(stripped.rstrip("\\"))
        if n % 2 == 1:
            pending += stripped[:-1]
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    result: dict[str, str] = {}
    for line in logical:
        i = 0
        key_chars: list[str] = []
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if ch in "=: \t\f":
                break
            key_chars.append(ch)
            i += 1
        # skip whitespace, then one separator, then whitespace
        while i < len(line) and line[i] in " \t\f":
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in " \t\f":
                i += 1
        key = _unescape("".join(key_chars))
        value = _unescape(line[i:].rstrip("\r\n"))
        result[key] = value
    return result


def load_properties_file(path: str | Path) -> dict[str, str]:
    return load_properties(Path(path).read_text(encoding="utf-8"))
