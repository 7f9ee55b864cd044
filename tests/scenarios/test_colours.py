"""The colours live once, as CSS custom properties in static/dashboard/css/asicmon.css: no
colour of that palette is written out in Python, JavaScript or a template (they name it,
var(--name) or colour("name")), and every var(--name) the code names is defined there."""

import re
from pathlib import Path

from fleet.reading.charts import THRESHOLDS
from fleet.reading.key_counters import KEY_COUNTERS, RULE_SERIES

ROOT = Path(__file__).resolve().parents[2]
CSS = ROOT / "static/dashboard/css/asicmon.css"
HEX = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")
PROPERTY = re.compile(r"(--[\w-]+):\s*(#[0-9a-fA-F]{3,6})\b")
SOURCES = ["fleet", "traces", "dashboard", "emulator", "static/dashboard/js"]


def palette() -> dict[str, str]:
    """The custom properties of :root, name to colour."""
    root = CSS.read_text().split(":root {", 1)[1].split("}", 1)[0]
    return {name: value.lower() for name, value in PROPERTY.findall(root)}


def sources():
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".js", ".html"} and "vendor" not in path.parts:
                yield path


def test_the_palette_is_defined_in_the_css():
    colours = palette()
    assert colours["--health-critical"] == "#d64545" and colours["--health-healthy"] == "#2e9e5b"
    assert len(colours) > 20


def test_no_colour_of_the_palette_is_written_outside_the_css():
    colours = set(palette().values())
    found = [
        f"{path.relative_to(ROOT)}:{n}: {hit}"
        for path in sources()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for hit in HEX.findall(line)
        if hit.lower() in colours
    ]
    assert found == [], "colours of the palette written out instead of named:\n" + "\n".join(found)


def test_every_colour_named_in_code_is_defined():
    defined = set(palette())
    named_py = [c.colour for c in (*KEY_COUNTERS, *RULE_SERIES)] + [colour for lines in THRESHOLDS.values() for _, _, colour in lines]
    assert all(re.fullmatch(r"var\(--[\w-]+\)", c) for c in named_py), named_py
    named = {c[4:-1] for c in named_py}
    for path in sources():
        text = path.read_text(errors="replace")
        named |= set(re.findall(r"var\((--[\w-]+)\)", text))
        if path.suffix == ".js":
            named |= {f"--{n}" for n in re.findall(r"colour\(\s*[`\"]([\w-]+)[`\"]\s*\)", text)}
    missing = sorted(n for n in named - {"--name"} if n not in defined)  # (--name: in comments)
    assert missing == []
