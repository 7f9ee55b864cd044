"""Requests joined to the engine steps that served them (joining), and why one was slow
(report)."""
