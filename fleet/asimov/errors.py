"""Asimov errors: each names the file, line and column, shows the line with a caret under
the offending spot, and says what was expected."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Abort", "AsimovError", "SpecErrors"]


@dataclass
class AsimovError(Exception):
    message: str
    file: str
    line: int
    column: int
    source_line: str = ""
    expected: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}:{self.column}: error: {self.message}"
        if self.source_line:
            shown = self.source_line.rstrip("\n").expandtabs(1)
            text += f"\n    {shown}\n    {' ' * (self.column - 1)}^"
        if self.expected:
            text += f"\n  expected {self.expected}"
        return text

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.column, self.message))


class SpecErrors(Exception):
    """All the errors found in one spec, in source order."""

    def __init__(self, errors: list[AsimovError]) -> None:
        self.errors = sorted(errors, key=lambda e: (e.line, e.column))
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.errors)
        return "\n".join(str(e) for e in self.errors) + f"\n{n} error{'s' if n != 1 else ''}"


class Abort(Exception):
    """Stops checking one statement after its error was recorded (inside the checker)."""
