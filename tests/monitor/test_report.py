"""The HTML report: self-contained, complete sections, renders in headless Chromium with visible plots,
and still works for half-written or missing run dirs."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from synthetic_runs import episode, make_run
from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.monitor.report import build_report, write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PLOT_BLUE = (0x1F, 0x77, 0xB4)  # first palette colour: every plotted series starts with it


def _hacky_run(path: Path) -> Path:
    bad = ["<action>cat > conftest.py <<EOF\nimport pytest\nEOF</action>", "<answer>ok</answer>"]
    return make_run(path, trajectories=lambda i: [episode(f"h{i}", success=False, actions=bad),
                                                  episode(f"ok{i}", success=True),
                                                  episode(f"loop{i}", success=False, actions=["<action>ls</action>"] * 4,
                                                          termination="truncated")],
                    extra=lambda i: {"audit/flagged_rate": 1 / 3, "audit/conftest": 1 / 3})


def test_report_is_self_contained_and_has_every_section(tmp_path):
    page = build_report(_hacky_run(tmp_path / "run"))
    for heading in ("Diagnosis (doctor)", "Training curves", "Evaluations", "Before / after", "Failure categories",
                    "Reward-hacking audit", "Trajectories", "Config"):
        assert heading in page
    for title in ("Reward per episode", "Success: train vs held-out", "Policy entropy", "KL to reference",
                  "Response length", "Action distribution", "Curriculum level"):
        assert title in page
    assert page.count("<svg") >= 10
    assert "Reward-hacking audit (share of episodes)" in page  # the trainer's audit/* metrics are plotted
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page), "the report must not load anything from the network"
    assert "<script" not in page
    assert "conftest" in page and "loop" in page  # the audit flag and the failure category
    assert "&lt;action&gt;cat &gt; conftest.py" in page  # trajectory text is escaped, not injected


def test_report_shows_before_after_comparison(tmp_path):
    run = make_run(tmp_path / "run")
    (run / "compare.json").write_text('{"baseline": "base", "method": "exact McNemar", "rows": ['
                                      '{"policy": "base", "success_rate": 0.2}, {"policy": "rl", "success_rate": 0.6, '
                                      '"p_value": 0.01, "significant": true}]}')
    page = build_report(run)
    assert "exact McNemar" in page and ">rl<" in page


def _blue_pixels(png: Path):
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    mask = np.abs(pixels - np.array(PLOT_BLUE)).sum(axis=-1) < 60
    return pixels, mask


def _screenshot(html: Path, png: Path) -> None:
    profile = tempfile.mkdtemp()
    try:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000",
                        html.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert png.exists()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium_with_visible_plots(tmp_path):
    run = make_run(tmp_path / "run")
    _screenshot(write_report(run), tmp_path / "full.png")
    pixels, blue = _blue_pixels(tmp_path / "full.png")
    ys, xs = blue.nonzero()
    assert blue.sum() > 2000, "no plotted lines visible"
    assert ys.max() - ys.min() > 600, "plots should fill several rows of the page"
    region = pixels[ys.min():ys.max(), xs.min():xs.max()]
    assert region.std() > 20, "the plot region is blank"
    # Negative control: a run without metrics renders "no data" boxes — no plotted lines.
    empty = tmp_path / "empty"
    empty.mkdir()
    _screenshot(write_report(empty), tmp_path / "empty.png")
    assert _blue_pixels(tmp_path / "empty.png")[1].sum() < 50


def test_half_written_run_gets_a_report_saying_what_is_missing(tmp_path):
    run = make_run(tmp_path / "killed", evals=False)
    (run / "config.yaml").unlink()
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('{"iteration": 20, "rew')
    page = build_report(run)
    assert "What is missing" in page
    assert "missing: config.yaml" in page and "missing: eval.jsonl" in page
    assert "torn last line" in page
    assert "Reward per episode" in page and "no eval.jsonl rows" in page


def test_cli_report_for_missing_dir_and_default_location(tmp_path):
    runner = CliRunner()
    run = make_run(tmp_path / "run")
    ok = runner.invoke(app, ["report", str(run)])
    assert ok.exit_code == 0, ok.output
    assert (run / "report.html").exists()
    missing = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r.html")])
    assert missing.exit_code == 0
    assert "no such directory" in (tmp_path / "r.html").read_text()
