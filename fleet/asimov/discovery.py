"""The ``discover`` statement: which devices of a machine a spec applies to.

    discover nvml()
    discover folders("${HWMON_ROOT}/*", requires=["name", "temp1_input"], serial=link("device"))
    discover folders("/sys/class/emu_vt/vt*", requires=["serial"], serial=file("serial"))

``nvml()`` is every GPU the NVML library counts (the binding's ``index`` and ``lib``; the
serial is the GPU's UUID). ``folders(pattern, requires=[...], serial=...)`` is every folder
matching the glob ``pattern`` (``${NAME}`` is a setting or an environment variable) that holds
every file in ``requires``; the binding's ``files`` is that folder. Its serial is the text of
a file in it (``file("serial")``: a serial number the device reports), or the device a link
points at (``link("device")``: ``<type>:<host>:<PCI address or device name>:<name file>``),
or, without ``serial=``, ``<type>:<host>:<folder name>``.

The rule must fit how the spec reads: ``nvml()`` hands each device the NVML library (a
spec that reads files cannot use it), ``folders(...)`` a folder of files (a spec that calls
a library cannot use it); `check_discovery_fits` reports a mismatch at the rule.

The statement is checked here and recorded as a plain dict, emitted as the generated class's
``DISCOVERY``; `fleet.hosts.local` acts on it. A spec without one is for emulated devices only.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fleet.asimov.checking.checks import check_relative_path
from fleet.asimov.language.nodes import Call, Discover, Keyword, ListExpr, Node, String

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["check_discovery_fits", "discover_stmt"]

RULES = "nvml() or folders(pattern, requires=[...], serial=...)"
SERIAL_RULES = {"file": "a file in the folder holding the device's serial",
                "link": "a link in the folder to the device it belongs to"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def discover_stmt(c: CheckerInterface, stmt: Discover, index: int) -> None:
    call = stmt.rule
    if c.discovery is not None:
        raise c.error(stmt, f"a spec has one discover statement (the first is on line {c.discovery['line']})",
                      "one discover statement")
    rule = call.function_name if isinstance(call, Call) else None
    if rule not in ("nvml", "folders"):
        raise c.error(call, "discover takes a discovery rule", RULES)
    c.discovery_rule = call
    args, kwargs = _arguments(c, call)
    if rule == "nvml":
        if args or kwargs:
            raise c.error(call, "nvml() takes no arguments", "discover nvml()")
        c.discovery = {"rule": "nvml", "line": stmt.line}
        return
    c.discovery = {"rule": "folders", "line": stmt.line, **_folders(c, call, args, kwargs)}


def _arguments(c: CheckerInterface, call: Call) -> tuple[list, dict[str, Keyword]]:
    args, kwargs = [], {}
    for arg in call.args:
        if isinstance(arg, Keyword):
            if arg.name.text in kwargs:
                raise c.error(arg.name, f"{arg.name.text}= is given twice", "each keyword once")
            kwargs[arg.name.text] = arg
        else:
            args.append(arg)
    return args, kwargs


def _folders(c: CheckerInterface, call: Call, args: list, kwargs: dict[str, Keyword]) -> dict:
    if len(args) != 1:
        raise c.error(call, "folders() takes one glob pattern", 'folders("/sys/class/…/dev*", …)')
    pattern = _string(c, args[0], "the glob pattern of the device folders")
    if not (pattern.startswith("/") or pattern.startswith("${")):
        raise c.error(args[0], "the pattern must be an absolute path", 'a path starting with "/" or "${SETTING}"')
    unknown = sorted(set(kwargs) - {"requires", "serial"})
    if unknown:
        raise c.error(kwargs[unknown[0]].name, f"folders() has no argument {unknown[0]}=", "requires= or serial=")
    requires = _requires(c, kwargs["requires"].value) if "requires" in kwargs else []
    serial = _serial(c, kwargs["serial"].value) if "serial" in kwargs else None
    return {"pattern": pattern, "variables": _VARIABLE.findall(pattern), "requires": requires, "serial": serial}


def _string(c: CheckerInterface, node: Node, what: str) -> str:
    if not isinstance(node, String):
        raise c.error(node, f"expected a string: {what}", "a string literal")
    return node.value


def _requires(c: CheckerInterface, node: Node) -> list[str]:
    if not isinstance(node, ListExpr):
        raise c.error(node, "requires= takes a list of file names", '["name", "temp1_input"]')
    names = [_string(c, item, "a file name in the folder") for item in node.items]
    for item, name in zip(node.items, names, strict=True):
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise c.error(item, f"{name!r} is not a path inside the folder", "a relative path such as \"name\"")
    return names


def _serial(c: CheckerInterface, node: Node) -> list[str]:
    rule = node.function_name if isinstance(node, Call) else None
    if rule not in SERIAL_RULES:
        raise c.error(node, "serial= takes file(\"…\") or link(\"…\")",
                      "; ".join(f"{k}(name): {v}" for k, v in SERIAL_RULES.items()))
    if len(node.args) != 1:
        raise c.error(node, f"{rule}() takes one name", f'{rule}("…")')
    (name,) = node.args
    text = _string(c, name, SERIAL_RULES[rule])
    check_relative_path(c, name, text, f"{rule}()'s name")
    return [rule, text]


def check_discovery_fits(c: CheckerInterface) -> None:
    """After every statement: the discovery rule must give the device what the spec reads
    through (a folder for ``file()`` and ``write()``, the NVML library for ``lib``)."""
    if c.discovery is None:
        return
    if c.discovery["rule"] == "nvml" and c.uses_files:
        c.error(c.discovery_rule, "discover nvml() gives each GPU the NVML library, but this spec reads files",
                'discover folders("…", requires=[…]) for a spec that reads files')
    elif c.discovery["rule"] == "folders" and c.uses_lib:
        c.error(c.discovery_rule, "discover folders(...) gives each device a folder of files, but this spec calls lib",
                "discover nvml() for a spec that calls the NVML library")
