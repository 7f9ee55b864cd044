"""A device page in Chromium draws its history from the time-series store: a long range as
bands (mean line, min–max band, one point a step, computed by the store), a short one as the
raw samples, which live polls extend; with the store down, the page says the history is
unavailable and still shows the latest values."""

from datetime import UTC, datetime

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from fleet.polling import snapshots
from tests.support.browser import sign_in
from tests.support.history import write_points
from tests.support.processes import child_env, free_port, start_web
from tests.support.tiers import starts_processes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
@starts_processes
def web(seeded_fleet):
    service, url = start_web(child_env())
    yield url
    service.stop()


@pytest.fixture
@starts_processes
def web_without_store(seeded_fleet):
    service, url = start_web(child_env(TSDB_URL=f"http://127.0.0.1:{free_port()}"))
    yield url
    service.stop()


def chart(browser, counter="temperature_c") -> list[dict]:
    """The traces Plotly drew for a counter: name, x (epoch seconds) and y."""
    return browser.execute_script(
        "return document.getElementById(arguments[0]).data.map((t) => ({name: t.name, x: t.x, y: t.y}));",
        f"chart-{counter}",
    )


def figure(browser, counter="temperature_c") -> dict:
    """The figure the server sent for a counter's graph."""
    figures = browser.execute_script("return JSON.parse(document.getElementById('device-figures').textContent);")
    return next(f for f in figures if f["counter"] == counter)


def drawn_range(browser, counter="temperature_c") -> list[float]:
    """The x axis' range Plotly drew, in epoch seconds (its dates are UTC without a zone)."""
    ends = browser.execute_script(f"return document.getElementById('chart-{counter}').layout.xaxis.range;")
    return [datetime.fromisoformat(e).replace(tzinfo=UTC).timestamp() for e in ends]


def epochs(xs) -> list[float]:
    return [datetime.fromisoformat(x).timestamp() for x in xs]


def test_a_long_range_draws_bands_and_a_short_one_raw_samples(browser, web, viewer, seeded_fleet):
    device = seeded_fleet[0]
    end = float(int(datetime.now(tz=UTC).timestamp()))
    points = [(end - 5 * i, 40.0 + (i * 7 % 13)) for i in range(2160)][::-1]  # three hours, every 5 s
    write_points(device, {"temperature_c": points})
    value_at = dict(points)

    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    browser.get(f"{web}/devices/{device.id}/?range=24h")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    resolution = browser.find_element(By.ID, "resolution")
    assert resolution.get_attribute("data-resolution") == "180s" and "3-minute mean, min–max band" in resolution.text
    mean, high, low = chart(browser)
    assert (high["name"], low["name"]) == ("max", "min")
    ends = epochs(mean["x"])
    buckets = sorted({-(-t // 180) * 180 for t, _ in points})  # a point at the end of every 3 minutes with samples
    axis_end = epochs([figure(browser)["layout"]["xaxis"]["range"][1]])[0]
    assert ends == [min(t, axis_end) for t in buckets]  # the bucket that holds "now" drawn at the axis' end
    for t, y, top, bottom in zip(buckets, mean["y"], high["y"], low["y"], strict=True):
        values = [v for s, v in points if t - 180 < s <= t]
        assert y == pytest.approx(sum(values) / len(values)) and (top, bottom) == (max(values), min(values))

    browser.find_element(By.LINK_TEXT, "15 min").click()
    wait.until(lambda b: b.find_element(By.ID, "resolution").get_attribute("data-resolution") == "raw")
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    (line,) = chart(browser)  # one line, no band
    drawn = [(t, y) for t, y in zip(epochs(line["x"]), line["y"], strict=True) if y is not None]
    assert len(drawn) >= 170  # the samples of the last 15 minutes (180, less the seconds the page came later)
    assert all(value_at[t] == y for t, y in drawn)  # each one a sample written, at its time
    assert drawn[-1][0] == end


def test_without_the_store_the_page_says_history_is_unavailable(browser, web_without_store, viewer, seeded_fleet):
    device = seeded_fleet[0]
    snapshots.write_snapshots(1.0, {device.id: {"temperature_c": 63.5, "power_w": 241.0}})
    sign_in(browser, web_without_store, "vera")
    browser.get(f"{web_without_store}/devices/{device.id}/")
    notice = WebDriverWait(browser, 30).until(lambda b: b.find_element(By.ID, "history-unavailable"))
    assert "History unavailable: the time-series store at" in notice.text and "not answering" in notice.text
    empty = browser.find_element(By.CSS_SELECTOR, "#chart-temperature_c .chart-empty").text
    assert "history unavailable; the graph starts with the next poll" in empty
    assert "63.5 °C" in browser.find_element(By.ID, "counters").text  # the latest values, from Redis


def test_a_stopped_device_says_when_it_was_last_seen_and_every_graph_spans_the_range(browser, web, viewer, seeded_fleet):
    """A device whose agent stopped two hours ago, after a minute of samples (issue 26): the
    15-minute page says when the last sample was and offers the range that reaches it instead
    of promising a poll; the 6-hour and 30-day pages draw that minute over the whole range
    chosen (not a one-millisecond axis, nor one around a bucket's end in the future), and a
    lone point shows."""
    device = seeded_fleet[0]
    now = datetime.now(tz=UTC).timestamp()
    last = float(int(now - 2 * 3600))
    points = [(last - 5 * i, 50.0 + i) for i in range(12)][::-1]  # one minute, every 5 s
    write_points(device, {"temperature_c": points, "power_w": [(t, 200.0) for t, _ in points]})
    snapshots.write_snapshots(last, {device.id: {"temperature_c": 61.0, "power_w": 200.0, "sample_ts": last}})

    sign_in(browser, web, "vera")
    wait = WebDriverWait(browser, 30, poll_frequency=0.2)
    browser.get(f"{web}/devices/{device.id}/?range=15m")
    empty = wait.until(lambda b: b.find_element(By.CSS_SELECTOR, "#chart-temperature_c .chart-empty")).text
    stamp = datetime.fromtimestamp(last, tz=UTC).strftime("%H:%M:%S")
    assert "last sample was at" in empty and stamp in empty and "next poll" not in empty, empty
    assert not browser.find_elements(By.CSS_SELECTOR, "#charts .js-plotly-plot")  # nothing drawn over an empty range
    browser.find_element(By.CSS_SELECTOR, "#chart-temperature_c a.longer-range").click()
    wait.until(lambda b: "range=6h" in b.current_url)

    for span in (6 * 3600, 30 * 86400):
        if span > 6 * 3600:
            browser.get(f"{web}/devices/{device.id}/?range=30d")
        for counter in ("temperature_c", "power_w"):
            wait.until(lambda b, c=counter: b.find_elements(By.CSS_SELECTOR, f"#chart-{c} .main-svg"))
            start, end = drawn_range(browser, counter)
            assert end - start == pytest.approx(span, abs=1), (counter, span)
            assert abs(end - now) < 120, (counter, span)  # ends now, not in the future
            (line, *_) = chart(browser, counter)
            values = [y for y in line["y"] if y is not None]
            assert values, (counter, span)
            assert all(start <= t <= end for t in epochs(line["x"])), (counter, span)
            sizes = browser.execute_script(f"return document.getElementById('chart-{counter}').data[0].marker.size;")
            if len(values) == 1:  # a lone point (a band at 30 days) is drawn as a marker
                assert max(sizes) > 0, (counter, span, sizes)


def test_a_drawn_chart_gets_the_colours_the_css_defines(browser, web, viewer, seeded_fleet):
    """The server's figures name their colours (var(--counter-temperature), the thresholds'
    var(--health-*)); Plotly does not understand those, so the page's chart helper puts the
    CSS custom properties' colours in their place before drawing."""
    device = seeded_fleet[0]
    end = float(int(datetime.now(tz=UTC).timestamp()))
    write_points(device, {"temperature_c": [(end - 5 * i, 60.0 + i) for i in range(60)][::-1]})
    sign_in(browser, web, "vera")
    browser.get(f"{web}/devices/{device.id}/?range=15m")
    WebDriverWait(browser, 30, poll_frequency=0.2).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#chart-temperature_c .main-svg"))
    sent = figure(browser)
    assert sent["data"][0]["line"]["color"] == "var(--counter-temperature)"
    css = browser.execute_script(
        "const s = getComputedStyle(document.documentElement);"
        "return ['--counter-temperature', '--health-warning', '--health-critical'].map((n) => s.getPropertyValue(n).trim());"
    )
    drawn = browser.execute_script(
        "const div = document.getElementById('chart-temperature_c');"
        "return [div.data[0].line.color, ...div.layout.shapes.filter((s) => s.type === 'line').map((s) => s.line.color)];"
    )
    assert all(c.startswith("#") for c in css), css
    assert drawn[0] == css[0] and set(css[1:]) <= set(drawn[1:]), (drawn, css)
    # What is on the screen is that colour too (Plotly paints the line's stroke with it).
    stroke = browser.execute_script("return document.querySelector('#chart-temperature_c .scatterlayer path.js-line').style.stroke;")
    red, green, blue = (int(css[0][i:i + 2], 16) for i in (1, 3, 5))
    assert stroke.replace(" ", "") == f"rgb({red},{green},{blue})"
