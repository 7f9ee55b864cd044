"""The HTML report: one file, its charts' data and the figures, written whole."""

import json

from emulator.__main__ import main
from emulator.replay.engine import Settings, replay
from emulator.replay.history import Fault
from emulator.replay.html import PLOTLY, render, write_html
from emulator.replay.report import summarise


def summary(kind="GPU/GPU Lost"):
    s = Settings(nodes=1, devices_per_node=2, jobs=(1,), horizon_s=10000.0, person_delay_s=3600.0,
                 checkpoint_s=1000.0, restart_s=100.0)
    faults = [Fault("n1", 2500.0, 2500.0 + 86400, kind)]
    return summarise(replay(faults, s), faults, s)


def test_render_holds_the_figures_and_the_charts_data():
    page = render(summary(), plotly_js="/* plotly */")
    assert "<th>asicmon</th><th>none</th><th>reboot</th>" in page
    assert "<td>86.780%</td><td>20.000%</td><td>87.980%</td>" in page  # the hand-computed ETTRs
    charts = json.loads(page.split("for (const c of ")[1].split(") Plotly.newPlot")[0].replace("<\\/", "</"))
    assert [c["id"] for c in charts] == ["service", "ettr", "losses"]
    assert charts[0]["data"][0]["y"] == [100 * (1 - 1322 / 20000)]


def test_a_class_name_cannot_close_the_script():
    page = render(summary("</script><b>x"), plotly_js="/* plotly */")
    assert page.count("</script>") == 2 and "<\\/script><b>x" in page


def test_write_html_inlines_plotly_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "r.html"
    write_html(summary(), out)
    assert out.stat().st_size > PLOTLY.stat().st_size and list(tmp_path.iterdir()) == [out]


def test_cli_html_and_a_folder_that_is_not_there(tmp_path, capsys):
    hist = tmp_path / "h.csv"
    hist.write_text("n1,0.01,0.02,GPU,GPU Lost\n")
    assert main(["replay", str(hist), "--nodes", "2", "--jobs", "1", "--html", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").is_file()
    assert main(["replay", str(hist), "--nodes", "2", "--jobs", "1", "--html", str(tmp_path / "no" / "r.html")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
