"""The HTML report opened in headless Chromium: pixels drawn, element ids present, nothing fetched."""
from html.parser import HTMLParser

import pytest

from trnsim.compare import Workload, compare
from trnsim.compare.search import Choice
from trnsim.cost import PriceBook
from trnsim.report import to_markdown, write_html
from trnsim.report.charts import Chart, backend, pareto_frontier, render
from trnsim.report.tables import systems_table


def _comparison():
    table = {"trn1.32xlarge": (40 * 86400.0, 64, 1e12, 1.0, 0.1), "trn2.48xlarge": (20 * 86400.0, 32, 1e12, 1.0, 0.2),
             "p5.48xlarge": (25 * 86400.0, 32, 1e12, 1.0, 0.25)}

    def choose(ref, w):
        t, n, tok, busy, band = table[ref.key]
        return Choice(system=ref, config={"tp": 8, "pp": 2}, instances=n, time_s=t, tokens=tok, busy=busy,
                      error_band=band, metrics={"tokens_per_s": tok / t})
    return compare(Workload(model="llama-3-8b", tokens=1e12), list(table), PriceBook.load(overrides={"trn2.48xlarge": 30}),
                   baseline="p5.48xlarge", choose_fn=choose).to_dict()


class _Refs(HTMLParser):
    """src/href of the elements a browser fetches from."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "link", "img", "iframe", "source", "object", "embed", "video", "audio"):
            self.urls += [v or "" for k, v in attrs if k in ("src", "href", "data")]


def _fetching_urls(doc: str):
    p = _Refs()
    p.feed(doc)
    return p.urls


def test_url_finder_finds_a_remote_script():
    assert _fetching_urls('<script src="https://cdn.example/x.js"></script><img src="a.png">') == \
        ["https://cdn.example/x.js", "a.png"]
    assert _fetching_urls('<script>var u = "<img src=https://x>";</script>') == []


def test_pareto_frontier_by_hand():
    pts = [(1, 5), (2, 3), (3, 4), (4, 1), (2.5, 3)]
    assert pareto_frontier(pts) == [(1, 5), (2, 3), (4, 1)]


def test_table_rows_and_markdown():
    d = _comparison()
    cols, rows = systems_table(d)
    assert len(rows) == 3 and "total cost" in cols
    assert rows[0][0] == "trn2.48xlarge"       # 32 x 480 h x $30 is the cheapest
    md = to_markdown(d)
    assert md.count("\n| trn") >= 2 and d["summary"] in md


def test_html_report_in_headless_chromium(tmp_path, chromium):
    d = _comparison()
    page = tmp_path / "compare.html"
    write_html(d, str(page), "test report")
    text = page.read_text()
    dom = chromium["dump_dom"](str(page))
    # no request leaves the page: no remote URL in src/href of scripts, links, images, frames (in the file and
    # in the DOM after the scripts ran; URLs inside a script's own text are not requests)
    for doc in (text, dom):
        urls = _fetching_urls(doc)
        assert not [u for u in urls if u.lower().startswith(("http:", "https:", "//"))], urls
    ids = ["report-title", "summary", "compare-table", "prices-table", "sensitivity-table"]
    if backend():
        ids += ["pareto-chart", "cost-chart", "energy-chart", "sensitivity-chart"]
        if backend() == "plotly":
            assert 'class="main-svg"' in dom or "main-svg" in dom   # plotly drew its SVG in the browser
    else:
        ids.append("charts-missing")
    for i in ids:
        assert f'id="{i}"' in dom, i
    assert "trn2.48xlarge" in dom
    px = chromium["screenshot"](str(page), str(tmp_path / "shot.png"))
    grey = px[..., :3].astype(float).mean(axis=2)
    assert grey.std() > 10, "the screenshot is blank"
    assert (grey < 128).mean() > 0.002   # some dark pixels: text and lines were drawn


@pytest.mark.parametrize("which", ["plotly", "matplotlib"])
def test_each_backend_draws_without_network(which):
    pytest.importorskip(which)
    c = Chart(id="x", title="t", kind="scatter", x=(1.0, 2.0), series=(("s", (3.0, 1.0)),), labels=("a", "b"),
              frontier=((1.0, 3.0), (2.0, 1.0)))
    frag = render(c, which)
    assert frag and "https://cdn" not in frag


def test_blank_page_fails_the_pixel_check(tmp_path, chromium):
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><body style='background:#fff'></body></html>")
    px = chromium["screenshot"](str(page), str(tmp_path / "blank.png"), size=(400, 300))
    assert px[..., :3].astype(float).mean(axis=2).std() < 1.0
