"""``action NAME = call``: a control action of the monitor, declared like a counter.

    action reboot = write("reset", "1")        # a sysfs write
    action reboot = lib.nx_reset(handle)        # a C-library call (status 0 is success)
    action reboot = lib.emuDeviceReset(handle)  # a GPU API call (raises on failure)

The call is made when Asicmon acts (`DeviceMonitor.control`), never on a refresh. Its
arguments are once-bindings (a handle), constants, ``index`` or literals. A spec that
declares no ``reboot`` leaves its devices to the repair path.
"""

from __future__ import annotations

from lark import Tree

from fleet.asicmon.monitor import CONTROL_ACTIONS
from fleet.asimov.checks import suggest
from fleet.asimov.state import Compilation
from fleet.asimov.tree import string_value

__all__ = ["action_stmt"]

_SHAPES = 'a driver call: write("path", "value") or lib.function(handle, ...)'


def action_stmt(c: Compilation, stmt: Tree, index: int) -> None:
    name_tok, call = stmt.children
    name = str(name_tok)
    if name not in CONTROL_ACTIONS:
        raise c.error(name_tok, f"unknown control action {name!r}", suggest(name, CONTROL_ACTIONS, "a control action"))
    if name in c.actions:
        raise c.error(name_tok, f"action {name} is declared twice", "one declaration per action")
    if not isinstance(call, Tree) or call.data != "call":
        raise c.error(call, "an action is a driver call", _SHAPES)
    func, args_node = call.children
    args = list(args_node.children) if args_node is not None else []
    codes = [_argument(c, arg) for arg in args]
    if func.data == "name" and str(func.children[0]) == "write":
        if len(args) != 2 or any(a.data != "string" for a in args):
            raise c.error(call, "write() takes a path and a value, both strings", 'write("reset", "1")')
        c.uses_files = True
        c.actions[name] = f"self.files.write_text({codes[0]}, {codes[1]})"
    elif func.data == "attr" and func.children[0].data == "name" and str(func.children[0].children[0]) == "lib":
        c.uses_lib = True
        c.actions[name] = f"lib.{func.children[1]}({', '.join(codes)})"
    else:
        raise c.error(func, "an action calls write() or a function of lib", _SHAPES)


def _argument(c: Compilation, node: Tree) -> str:
    if node.data == "string":
        return repr(string_value(node.children[0]))
    if node.data == "number":
        return str(node.children[0])
    if node.data == "name":
        name = str(node.children[0])
        if name == "index":
            return "index"
        symbol = c.scope.get(name)
        if symbol is not None and symbol.kind == "once":
            symbol.used = True
            return f"self._{symbol.code}"
        if symbol is not None and symbol.kind == "const":
            return symbol.code
    raise c.error(node, "an action's arguments are known before it is called",
                  "a once-binding (like a handle), a constant, index, or a literal")
