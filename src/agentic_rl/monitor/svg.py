"""Inline SVG charts for the HTML report: no plotting library, no network, text-only output.

:func:`line_chart` draws one or more ``(x, y)`` series with axes, ticks and a legend; :func:`bar_chart`
draws labelled horizontal bars. Both return an ``<svg>`` string (or a "no data" box) sized in pixels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22")
Series = Sequence[tuple[float, float]]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1-2-5 steps)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw_step = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw_step))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw_step)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.4g}"


def empty_chart(title: str, message: str = "no data", width: int = 560, height: int = 240) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart empty" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" '
            f'fill="#fafafa" stroke="#ddd"/><text x="12" y="22" font-size="14" font-weight="bold">{escape(title)}'
            f'</text><text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#999" font-size="13">'
            f"{escape(message)}</text></svg>")


def line_chart(series: Mapping[str, Series], title: str, *, width: int = 560, height: int = 240,
               y_label: str = "", y_range: tuple[float, float] | None = None) -> str:
    """Lines (with point markers when sparse) for each named series; x is the iteration."""
    clean = {name: [(float(x), float(y)) for x, y in pts if math.isfinite(x) and math.isfinite(y)]
             for name, pts in series.items()}
    clean = {name: pts for name, pts in clean.items() if pts}
    if not clean:
        return empty_chart(title, width=width, height=height)
    xs = [x for pts in clean.values() for x, _ in pts]
    ys = [y for pts in clean.values() for _, y in pts]
    x_ticks = nice_ticks(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    y_ticks = nice_ticks(*(y_range or (min(ys), max(ys))))
    left, right, top, bottom = 58, 12, 30, 24 + 16 * math.ceil(len(clean) / 3)
    plot_w, plot_h = width - left - right, height - top - bottom
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]

    def sx(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * plot_w

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
             f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" stroke="#ddd"/>',
             f'<text x="12" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']
    if y_label:
        parts.append(f'<text x="{width - 12}" y="20" font-size="11" text-anchor="end" fill="#666">'
                     f"{escape(y_label)}</text>")
    for t in y_ticks:
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" font-size="10" text-anchor="end" fill="#555">'
                     f"{_fmt(t)}</text>")
    for t in x_ticks:
        parts.append(f'<text x="{sx(t):.1f}" y="{top + plot_h + 14}" font-size="10" text-anchor="middle" '
                     f'fill="#555">{_fmt(t)}</text>')
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" stroke="#999"/>'
                 f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#999"/>')
    for i, (name, pts) in enumerate(clean.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(pts)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        if len(pts) <= 40:
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"/>' for x, y in pts]
        lx = left + (i % 3) * (plot_w / 3)
        ly = top + plot_h + 30 + 16 * (i // 3)
        parts.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{lx + 14:.1f}" y="{ly}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(values: Mapping[str, float], title: str, *, width: int = 560, value_format: str = "{:.3g}") -> str:
    """Horizontal bars, one per label (e.g. failure categories, action kinds)."""
    items = [(str(k), float(v)) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)]
    if not items:
        return empty_chart(title, width=width, height=120)
    row, left, top = 22, 170, 32
    height = top + row * len(items) + 12
    peak = max(abs(v) for _, v in items) or 1.0
    plot_w = width - left - 70
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
             f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" stroke="#ddd"/>',
             f'<text x="12" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = top + i * row
        bar = abs(value) / peak * plot_w
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<text x="{left - 8}" y="{y + 14}" font-size="11" text-anchor="end">{escape(label[:28])}</text>'
                     f'<rect x="{left}" y="{y + 3}" width="{max(bar, 1):.1f}" height="{row - 6}" fill="{color}"/>'
                     f'<text x="{left + bar + 6:.1f}" y="{y + 14}" font-size="11">'
                     f"{escape(value_format.format(value))}</text>")
    parts.append("</svg>")
    return "".join(parts)
