"""Small inline-SVG charts for the HTML report: no JavaScript, no fonts or files fetched.

Each function returns one `<svg>` element as a string; every label is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from eval.terminal import inert

WIDTH = 1000
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 52, 56
LABELS_BOTTOM = 100  # room for rotated category labels


@dataclass(frozen=True)
class Point:
    center: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    points: Sequence[Point | None]  # one per category (None: no value)


def _t(text: str) -> str:
    return inert(escape(text, quote=True))


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _tick_label(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.2g}"


def _frame(height: int, title: str, body: list[str], legend: Sequence[tuple[str, str]]) -> str:
    parts = [
        f'<svg viewBox="0 0 {WIDTH} {height}" width="100%" role="img" aria-label="{_t(title)}" class="plot">',
        f'<text x="{LEFT}" y="20" class="plot-title">{_t(title)}</text>',
        *body,
    ]
    x = LEFT
    for name, color in legend:  # one row under the title
        parts.append(f'<rect x="{x}" y="28" width="10" height="10" fill="{_t(color)}"/>')
        parts.append(f'<text x="{x + 14}" y="37" class="plot-legend">{_t(name)}</text>')
        x += 30 + 7 * len(name)
    parts.append("</svg>")
    return "\n".join(parts)


def _y_axis(ticks: list[float], y_of: object, label: str, height: int, bottom: int = BOTTOM) -> list[str]:
    assert callable(y_of)
    out = []
    for v in ticks:
        y = y_of(v)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_t(_tick_label(v))}</text>'
        )
    mid = TOP + (height - TOP - bottom) / 2
    out.append(
        f'<text transform="translate(16 {mid:.1f}) rotate(-90)" text-anchor="middle" class="axis">{_t(label)}</text>'
    )
    return out


def errorbar_plot(
    categories: Sequence[str],
    series: Sequence[Series],
    y_label: str,
    title: str,
    height: int = 400,
    floor: float | None = None,
) -> str:
    """Per category, one marker per series with a vertical interval (low..high).

    `floor`: the smallest value the quantity can take (0 for times): the axis starts there and an interval
    reaching below it is clipped at it, drawn dashed (its tooltip gives the unclipped bound)."""
    values = [
        v
        for s in series
        for p in s.points
        if p is not None
        for v in (p.center, p.low, p.high)
        if v is not None
    ]
    if not categories or not values:
        return _frame(90, title, [f'<text x="{LEFT}" y="60" class="tick">no data</text>'], [])
    bottom = min(0.0, min(values)) if floor is None else floor
    ticks = nice_ticks(bottom, max(values))
    lo, hi = ticks[0] if floor is None else floor, ticks[-1]
    plot_h = height - TOP - LABELS_BOTTOM

    def y_of(v: float) -> float:
        return TOP + plot_h * (1 - (max(v, lo) - lo) / (hi - lo))

    body = _y_axis([t for t in ticks if t >= lo], y_of, y_label, height, LABELS_BOTTOM)
    slot = (WIDTH - LEFT - RIGHT) / len(categories)
    offsets = [(i - (len(series) - 1) / 2) * min(10.0, slot / (len(series) + 1)) for i in range(len(series))]
    for i, cat in enumerate(categories):
        cx = LEFT + slot * (i + 0.5)
        for s, dx in zip(series, offsets, strict=True):
            p = s.points[i]
            if p is not None:
                body += _errorbar_mark(cx + dx, p, f"{cat} {s.name}", s.color, y_of, lo)
        if len(categories) <= 40:
            body.append(
                f'<text transform="translate({cx:.1f} {height - LABELS_BOTTOM + 14}) rotate(35)" '
                f'class="tick">{_t(cat[:22])}</text>'
            )
    return _frame(height, title, body, [(s.name, s.color) for s in series])


def _errorbar_mark(
    x: float, p: Point, name: str, color: str, y_of: Callable[[float], float], lo: float
) -> list[str]:
    tip = f"{name}: {p.center:.4g}"
    out = []
    if p.low is not None and p.high is not None:
        clipped = p.low < lo
        tip += f" [{p.low:.4g}, {p.high:.4g}]" + (f" (interval clipped at {lo:g})" if clipped else "")
        dash = ' stroke-dasharray="3 2"' if clipped else ""
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_of(p.low):.1f}" y2="{y_of(p.high):.1f}" '
            f'stroke="{_t(color)}" stroke-width="1.5"{dash}/>'
        )
    out.append(
        f'<circle cx="{x:.1f}" cy="{y_of(p.center):.1f}" r="3.5" fill="{_t(color)}"><title>{_t(tip)}</title></circle>'
    )
    return out


StripPoint = int | tuple[int, str]  # a token position, or a position with the label shown beside its dot


def strip_plot(rows: Sequence[tuple[str, str, Sequence[StripPoint]]], x_label: str, title: str) -> str:
    """One horizontal strip per row (label, color, points), a dot per point; labelled points carry their
    label (e.g. the input's id) above the dot, stacked when several fall on the same position."""
    labelled = any(isinstance(pt, tuple) for _, _, ps in rows for pt in ps)
    row_h = 64 if labelled else 34
    height = TOP + BOTTOM + row_h * max(len(rows), 1)
    positions = [_position(pt) for _, _, ps in rows for pt in ps]
    if not positions:
        return _frame(90, title, [f'<text x="{LEFT}" y="60" class="tick">no divergences</text>'], [])
    ticks = nice_ticks(0.0, float(max(positions)))
    left = LEFT + 150

    def x_of(v: float) -> float:
        return left + (WIDTH - RIGHT - left) * (v - ticks[0]) / (ticks[-1] - ticks[0])

    body = []
    for v in ticks:
        body.append(
            f'<line x1="{x_of(v):.1f}" x2="{x_of(v):.1f}" y1="{TOP}" y2="{height - BOTTOM}" class="grid"/>'
        )
        body.append(
            f'<text x="{x_of(v):.1f}" y="{height - BOTTOM + 16}" text-anchor="middle" class="tick">{_t(_tick_label(v))}</text>'
        )
    body.append(
        f'<text x="{(left + WIDTH - RIGHT) / 2:.1f}" y="{height - 12}" text-anchor="middle" class="axis">{_t(x_label)}</text>'
    )
    for i, (label, color, ps) in enumerate(rows):
        y = TOP + row_h * (i + 0.5) + (18 if labelled else 0)
        body.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_t(label)} ({len(ps)})</text>'
        )
        body += _strip_dots(label, color, ps, x_of, y)
    return _frame(height, title, body, [])


def _position(pt: StripPoint) -> int:
    return pt[0] if isinstance(pt, tuple) else pt


LABEL_LEVELS = 4  # labelled strips: rows of labels above the dots


def label_levels(points: Sequence[tuple[float, float]], levels: int = LABEL_LEVELS) -> list[int]:
    """For labels at x (px) of a width (px), in order: the lowest row where each overlaps no label placed
    before it (the last row when every row is taken)."""
    placed: list[list[tuple[float, float]]] = [[] for _ in range(levels)]
    out = []
    for x, width in points:
        level = next(
            (k for k in range(levels) if all(x + width + 2 < a or x > b + 2 for a, b in placed[k])),
            levels - 1,
        )
        placed[level].append((x, x + width))
        out.append(level)
    return out


def _strip_dots(
    label: str, color: str, ps: Sequence[StripPoint], x_of: Callable[[float], float], y: float
) -> list[str]:
    order = sorted(ps, key=_position)
    names = [pt[1] if isinstance(pt, tuple) else "" for pt in order]
    # a label starts at its dot, or ends at the plot's right edge when it would run past it
    widths = [6.2 * len(n) for n in names]
    lefts = [min(x_of(_position(pt)) - 2, WIDTH - RIGHT - w) for pt, w in zip(order, widths, strict=True)]
    levels = label_levels(list(zip(lefts, widths, strict=True)))
    out = []
    for pt, name, level, left in zip(order, names, levels, lefts, strict=True):
        pos, x = _position(pt), x_of(_position(pt))
        tip = f"{label}: {name + ' ' if name else ''}token {pos}"
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{_t(color)}" fill-opacity="0.6"><title>{_t(tip)}</title></circle>'
        )
        if name:
            out.append(
                f'<text x="{left:.1f}" y="{y - 8 - 10 * level:.1f}" class="dot-label">{_t(name)}</text>'
            )
    return out


def grouped_bars(
    bins: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[int]]],
    x_label: str,
    y_label: str,
    title: str,
    height: int = 300,
) -> str:
    """A histogram per series over the same labelled bins, bars side by side."""
    top = max((c for _, _, counts in series for c in counts), default=0)
    if not bins or top == 0:
        return _frame(90, title, [f'<text x="{LEFT}" y="60" class="tick">no data</text>'], [])
    ticks = nice_ticks(0.0, float(top))
    plot_h = height - TOP - BOTTOM

    def y_of(v: float) -> float:
        return TOP + plot_h * (1 - v / ticks[-1])

    body = _y_axis(ticks, y_of, y_label, height)
    slot = (WIDTH - LEFT - RIGHT) / len(bins)
    bar_w = slot * 0.8 / max(len(series), 1)
    for i, label in enumerate(bins):
        x0 = LEFT + slot * i + slot * 0.1
        for j, (name, color, counts) in enumerate(series):
            v = counts[i]
            if v:
                body.append(
                    f'<rect x="{x0 + j * bar_w:.1f}" y="{y_of(v):.1f}" width="{bar_w:.1f}" '
                    f'height="{y_of(0) - y_of(v):.1f}" fill="{_t(color)}"><title>{_t(f"{name} {label}: {v}")}</title></rect>'
                )
        body.append(
            f'<text x="{LEFT + slot * (i + 0.5):.1f}" y="{height - BOTTOM + 16}" text-anchor="middle" class="tick">{_t(label)}</text>'
        )
    body.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{height - 12}" text-anchor="middle" class="axis">{_t(x_label)}</text>'
    )
    return _frame(height, title, body, [(n, c) for n, c, _ in series])
