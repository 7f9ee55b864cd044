"""Checking a spec's typed tree against the Asicmon catalogue: the checker's walk (checker),
statements and expressions one function each (statements, expressions), driver reads
(reads), the built-in functions (builtins), what it knows of a value (values), units (units)
and the checks these share (checks). The tables see the checker through a small protocol
(interface), so the checker imports them and none imports it back."""
