"""``action NAME = call``: a control action of the monitor, declared like a counter.

    action reboot = write("reset", "1")        # a sysfs write
    action reboot = lib.nx_reset(handle)        # a C-library call (status 0 is success)
    action reboot = lib.emuDeviceReset(handle)  # a GPU API call (raises on failure)

The call is made when Asicmon acts (`DeviceMonitor.control`), never on a refresh. Its
arguments are once-bindings (a handle), constants, ``index`` or literals. A spec that
declares no ``reboot`` leaves its devices to the repair path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.asicmon.monitor import CONTROL_ACTIONS
from fleet.asimov.checking.checks import check_lib_function, check_relative_path, suggest
from fleet.asimov.checking.values import Value
from fleet.asimov.language.nodes import Action, Call, Name, Node, Number, String

if TYPE_CHECKING:
    from fleet.asimov.checking.interface import CheckerInterface

__all__ = ["action_stmt"]

_SHAPES = 'a driver call: write("path", "value") or lib.function(handle, ...)'


def action_stmt(c: CheckerInterface, stmt: Action, index: int) -> None:
    where, name = stmt.name, stmt.name.text
    if name not in CONTROL_ACTIONS:
        raise c.error(where, f"unknown control action {name!r}", suggest(name, CONTROL_ACTIONS, "a control action"))
    if name in c.actions:
        raise c.error(where, f"action {name} is declared twice", "one declaration per action")
    call = stmt.call
    if not isinstance(call, Call):
        raise c.error(call, "an action is a driver call", _SHAPES)
    for arg in call.args:
        _argument(c, arg)
    if call.function_name == "write":
        if len(call.args) != 2 or any(not isinstance(a, String) for a in call.args):
            raise c.error(call, "write() takes a path and a value, both strings", 'write("reset", "1")')
        check_relative_path(c, call.args[0], call.args[0].value, "write()'s path")
        c.uses_files = True
    elif call.lib_function is not None:
        check_lib_function(c, call.func.attr)
        c.uses_lib = True
    else:
        raise c.error(call.func, "an action calls write() or a function of lib", _SHAPES)
    c.actions.append(name)


def _argument(c: CheckerInterface, node: Node) -> None:
    """An argument must be known before the action is called: the symbol a name stands for
    is kept for code generation."""
    if isinstance(node, (String, Number)):
        return
    if isinstance(node, Name):
        if node.id == "index":
            return
        symbol = c.scope.get(node.id)
        if symbol is not None and symbol.kind in ("once", "const"):
            c.use(symbol)
            c.note(node, Value(ref=symbol))
            return
    raise c.error(node, "an action's arguments are known before it is called",
                  "a once-binding (like a handle), a constant, index, or a literal")
