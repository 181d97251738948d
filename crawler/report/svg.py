"""Plain inline SVG charts, generated in Python: the report opens from disk with no script, no
font and no other file, in any browser.

Every mark carries its number in a ``data-value`` attribute (and a native ``<title>`` tooltip),
so a reader hovering and a test reading the DOM see the same figures as the text labels.
Every string that comes from the crawl (hosts, URLs, content types) is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
)  # fmt: skip
FONT = 12


def _a(value: object) -> str:
    """An attribute value, quoted and escaped."""
    return '"' + escape(str(value), quote=True) + '"'


def fmt_number(value: float) -> str:
    """1234 -> "1,234"; 0.25 -> "0.25"; 12.5 -> "12.5"."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"  # pragma: no cover - the loop returns


def fmt_duration(seconds: float) -> str:
    """Seconds as "1:05" (m:ss) or "2:03:04" (h:mm:ss)."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 10))
        t += step
    return ticks


def bar_chart(
    chart: str,
    rows: Sequence[tuple[str, float]],
    *,
    unit: str = "",
    width: int = 900,
    label_width: int = 260,
    colors: Sequence[str] | None = None,
    value_text: Sequence[str] | None = None,
) -> str:
    """Horizontal bars, one per (label, value), in the order given."""
    if not rows:
        return empty_chart(chart)
    bar_h, gap, top = 18, 6, 4
    height = top + len(rows) * (bar_h + gap)
    texts = list(value_text) if value_text else [fmt_number(v) + unit for _, v in rows]
    plot = width - label_width - 12 - 7 * max(len(t) for t in texts)
    top_value = max((v for _, v in rows), default=0) or 1
    out = [_svg_open(chart, width, height, "bar")]
    for i, (label, value) in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = max(1.0, plot * value / top_value) if value > 0 else 0.0
        color = colors[i % len(colors)] if colors else PALETTE[0]
        shown = texts[i]
        short = label if len(label) <= 34 else label[:31] + "..."
        out.append(
            f"<g class=\"bar\" data-label={_a(label)} data-value={_a(value)}>"
            f"<title>{escape(label)}: {escape(shown)}</title>"
            f'<text x="{label_width - 6}" y="{y + bar_h - 5}" text-anchor="end">'
            f"{escape(short)}</text>"
            f'<rect x="{label_width}" y="{y}" width="{w:.1f}" height="{bar_h}" '
            f'fill="{color}"/>'
            f'<text x="{label_width + w + 4:.1f}" y="{y + bar_h - 5}" class="value">'
            f"{escape(shown)}</text></g>"
        )
    out.append("</svg>")
    return "".join(out)


def empty_chart(chart: str, text: str = "nothing recorded") -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart empty" data-chart={_a(chart)} '
        f'data-kind="empty" width="640" height="30" viewBox="0 0 640 30" role="img">'
        f'<text x="8" y="20" class="muted">{escape(text)}</text></svg>'
    )


def _svg_open(chart: str, width: int, height: float, kind: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart={_a(chart)} '
        f'data-kind="{kind}" width="{width}" height="{height:.0f}" '
        f'viewBox="0 0 {width} {height:.0f}" role="img" font-size="{FONT}">'
    )


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    color: str = ""
    dashed: bool = False
    step: bool = False  # a value that holds until the next point (a setting, a delay asked)


@dataclass
class Dots:
    """A scatter layer: points, drawn as small circles."""

    name: str
    points: list[tuple[float, float]]
    color: str = ""
    flagged: set[int] = field(default_factory=set)  # indexes drawn in red (below the asked)


def line_chart(
    chart: str,
    series: Sequence[Series],
    *,
    dots: Sequence[Dots] = (),
    y_label: str = "",
    x_start: float = 0.0,
    x_end: float | None = None,
    y_max: float | None = None,
    width: int = 900,
    height: int = 220,
    legend: bool = True,
) -> str:
    """Lines (and optional dots) over time; x is seconds since ``x_start``, shown as m:ss.
    Values above ``y_max`` are drawn at the top edge (and say so in their tooltip)."""
    all_points = [p for s in series for p in s.points] + [p for d in dots for p in d.points]
    if not all_points:
        return empty_chart(chart)
    left, right, top, bottom = 56, 12, 10, 34
    legend_h = 18 if legend and len(series) + len(dots) > 1 else 0
    plot_w, plot_h = width - left - right, height - top - bottom - legend_h
    x0 = x_start
    x1 = x_end if x_end is not None else max(p[0] for p in all_points)
    if x1 <= x0:
        x1 = x0 + 1
    top_value = y_max if y_max is not None else max(p[1] for p in all_points)
    y_ticks = nice_ticks(0, top_value or 1, 4)
    y_top = max(y_ticks[-1], top_value or 1)

    def px(x: float) -> float:
        return left + plot_w * (x - x0) / (x1 - x0)

    def py(y: float) -> float:
        return top + plot_h * (1 - min(y, y_top) / y_top)

    out = [_svg_open(chart, width, height, "line")]
    for t in y_ticks:
        y = py(t)
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
            f"{fmt_number(t)}</text>"
        )
    for t in nice_ticks(0, x1 - x0, 6):
        x = px(x0 + t)
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="tick">'
            f"{fmt_duration(t)}</text>"
        )
    out.append(
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" class="axis"/>'
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" '
        f'class="axis"/>'
    )
    if y_label:
        out.append(
            f'<text x="12" y="{top + plot_h / 2:.0f}" transform="rotate(-90 12 '
            f'{top + plot_h / 2:.0f})" text-anchor="middle" class="tick">{escape(y_label)}</text>'
        )
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        coords = []
        prev_y: float | None = None
        for x, y in s.points:
            if s.step and prev_y is not None:
                coords.append(f"{px(x):.1f},{prev_y:.1f}")
            prev_y = py(y)
            coords.append(f"{px(x):.1f},{prev_y:.1f}")
        last = s.points[-1][1] if s.points else 0
        peak = max((p[1] for p in s.points), default=0)
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        out.append(
            f"<g class=\"series\" data-series={_a(s.name)} data-points=\"{len(s.points)}\" "
            f"data-last={_a(last)} data-max={_a(peak)}>"
            f"<title>{escape(s.name)}: last {fmt_number(last)}, max {fmt_number(peak)}</title>"
            f'<polyline points="{" ".join(coords)}" fill="none" stroke="{color}" '
            f'stroke-width="1.6"{dash}/></g>'
        )
    for j, d in enumerate(dots):
        color = d.color or PALETTE[(len(series) + j) % len(PALETTE)]
        marks = []
        for k, (x, y) in enumerate(d.points):
            fill = "#d62728" if k in d.flagged else color
            clipped = " (off the chart)" if y > y_top else ""
            marks.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.4" fill="{fill}">'
                f"<title>{fmt_duration(x - x0)}: {fmt_number(y)}{clipped}</title></circle>"
            )
        out.append(
            f"<g class=\"dots\" data-series={_a(d.name)} data-points=\"{len(d.points)}\" "
            f"data-flagged=\"{len(d.flagged)}\">{''.join(marks)}</g>"
        )
    if legend_h:
        x = left
        names = [(s.name, s.color or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
        names += [
            (d.name, d.color or PALETTE[(len(series) + j) % len(PALETTE)])
            for j, d in enumerate(dots)
        ]
        y = height - 6
        for name, color in names:
            out.append(
                f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 14}" y="{y}" class="tick">{escape(name)}</text>'
            )
            x += 24 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)
