"""Replaying a fleet's fault history against repair policies on a virtual clock
(``python -m emulator replay HISTORY``; docs/replay.md)."""
