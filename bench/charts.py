"""Inline SVG charts for the HTML report: no script, no external asset, no plotting library."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from bench.summary import Rate

__all__ = ["outcome_bar", "rate_chart"]

_LABEL_W = 250
_BAR_W = 420
_ROW_H = 22
_COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "ERROR": "#8d8d8d"}


def rate_chart(rows: Sequence[tuple[str, Rate]], title: str) -> str:
    """Horizontal bars of pass rates with their Wilson 95 % interval as a whisker."""
    height = _ROW_H * len(rows) + 34
    width = _LABEL_W + _BAR_W + 150
    parts = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in (0, 25, 50, 75, 100):
        x = _LABEL_W + _BAR_W * tick / 100
        parts.append(
            f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 24}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - 8}" font-size="11" text-anchor="middle" '
            f'fill="#555">{tick} %</text>'
        )
    for index, (label, rate) in enumerate(rows):
        y = 6 + index * _ROW_H
        mid = y + _ROW_H / 2 - 2
        parts.append(
            f'<text x="{_LABEL_W - 8}" y="{mid + 4:.1f}" font-size="12" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        if rate.rate is None:
            parts.append(
                f'<text x="{_LABEL_W + 4}" y="{mid + 4:.1f}" font-size="12" fill="#8d8d8d">'
                f"no verdict ({rate.errors} error(s))</text>"
            )
            continue
        bar = _BAR_W * rate.rate
        low, high = _LABEL_W + _BAR_W * rate.low, _LABEL_W + _BAR_W * rate.high
        parts.append(
            f'<rect x="{_LABEL_W}" y="{y + 3}" width="{bar:.1f}" height="{_ROW_H - 10}" '
            f'fill="#5c8dbc"><title>{escape(label)}: {rate.passed}/{rate.verdicts}</title></rect>'
            f'<line x1="{low:.1f}" y1="{mid:.1f}" x2="{high:.1f}" y2="{mid:.1f}" '
            f'stroke="#222" stroke-width="1.5"/>'
            f'<line x1="{low:.1f}" y1="{mid - 5:.1f}" x2="{low:.1f}" y2="{mid + 5:.1f}" '
            f'stroke="#222"/>'
            f'<line x1="{high:.1f}" y1="{mid - 5:.1f}" x2="{high:.1f}" y2="{mid + 5:.1f}" '
            f'stroke="#222"/>'
        )
        errors = f" · {rate.errors} err." if rate.errors else ""
        parts.append(
            f'<text x="{_LABEL_W + _BAR_W + 8}" y="{mid + 4:.1f}" font-size="12">'
            f"{100 * rate.rate:.0f} % ({rate.passed}/{rate.verdicts}){errors}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def outcome_bar(counts: dict[str, int], gate: float) -> str:
    """One stacked bar PASS / FAIL / ERROR, with the coverage threshold marked."""
    total = sum(counts.get(k, 0) for k in _COLOURS) or 1
    width, bar_w, height = _LABEL_W + _BAR_W + 150, _LABEL_W + _BAR_W, 64
    parts = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="outcomes">',
        "<title>PASS, FAIL and ERROR criteria, and the coverage threshold</title>",
    ]
    x = 0.0
    for kind, colour in _COLOURS.items():
        share = counts.get(kind, 0) / total
        if share:
            parts.append(
                f'<rect x="{x:.1f}" y="6" width="{bar_w * share:.1f}" height="26" fill="{colour}">'
                f"<title>{kind}: {counts.get(kind, 0)}</title></rect>"
            )
            if bar_w * share > 60:
                parts.append(
                    f'<text x="{x + 6:.1f}" y="24" font-size="12" fill="#fff">'
                    f"{kind} {counts.get(kind, 0)}</text>"
                )
        x += bar_w * share
    threshold = bar_w * gate
    parts.append(
        f'<line x1="{threshold:.1f}" y1="2" x2="{threshold:.1f}" y2="38" stroke="#000" '
        f'stroke-dasharray="4 3" stroke-width="2"/>'
        f'<text x="{threshold:.1f}" y="54" font-size="11" text-anchor="middle">'
        f"coverage threshold {100 * gate:.0f} %</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
