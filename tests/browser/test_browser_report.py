"""The analysis report in a real browser: findings first, every figure loads.

A generated open-loop 2^2·2 experiment is analysed once; Chromium opens its
index.html from disk. The screenshot of the first screen is kept as
test-artifacts/screenshots/report-first-screen.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.async_api import Page

from courier.analysis import pipeline, synthetic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
VIEWPORT_HEIGHT = 900  # the page fixture's viewport


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Iterator[Path]:
    experiment = synthetic.write_experiment(
        tmp_path_factory.mktemp("report") / "exp",
        factors={"clients": [1, 8], "instances": [1, 2]},
        replications=2,
        requests_per_run=3_000,
        arrival="open",
    )
    summary = pipeline.run(experiment, spark=spark)
    yield summary.report_dir / "index.html"


async def test_every_figure_of_the_report_loads(page: Page, report: Path) -> None:
    await page.goto(report.as_uri(), wait_until="load")
    images = await page.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])"
    )
    pngs = {f"plots/{p.name}" for p in (report.parent / "plots").glob("*.png")}
    assert {src for src, _ in images} == pngs
    assert len(pngs) >= 10
    assert all(width > 300 for _, width in images), images  # decoded, and big enough to read


async def test_the_first_screen_is_the_summary(page: Page, report: Path) -> None:
    await page.goto(report.as_uri(), wait_until="load")
    table = page.locator("#summary table")
    box = await table.bounding_box()
    assert box is not None and box["y"] + box["height"] <= VIEWPORT_HEIGHT
    summary = await page.inner_text("#summary")
    for expected in ("throughput (req/s) [95% CI]", "delivery p50 / p90", "Validity:",
                     "What mattered for throughput"):  # fmt: skip
        assert expected in summary
    # The raw tables and the spec wait in the appendix, after every finding.
    sections = await page.eval_on_selector_all("section", "s => s.map(x => x.id)")
    assert sections[0] == "summary" and sections[-1] == "appendix"
    assert await page.locator("#appendix pre").count() == 1  # the spec
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "report-first-screen.png"
    await page.screenshot(path=str(shot), full_page=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
