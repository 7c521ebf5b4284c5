"""The fleet's diagram (docs/fleet.svg) drawn from its source, docs/diagrams/fleet.yaml:
boxes with lines of text and labelled arrows at the coordinates the source gives. Plain
SVG text, the same bytes for the same source, so the docs test can say when the committed
picture and its source disagree (`mkf reference` rewrites it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "docs" / "diagrams" / "fleet.yaml"
SVG = ROOT / "docs" / "fleet.svg"
LINE = 15  # pixels between lines of text
STYLES = {
    "cluster": ("#f4f7fb", "#5b7db1", "bold"),
    "part": ("#ffffff", "#8aa2c8", "normal"),
    "secret": ("#fff8e6", "#c99a2e", "normal"),
    "person": ("#eef7ee", "#5a9a5a", "normal"),
}


def _box(box: dict[str, Any]) -> list[str]:
    fill, stroke, weight = STYLES[box.get("style", "part")]
    x, y, w, h = box["x"], box["y"], box["w"], box["h"]
    out = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" '
        f'stroke="{stroke}" stroke-width="1.5"/>'
    ]
    for i, line in enumerate(box["text"]):
        bold = weight if i == 0 else "normal"
        out.append(
            f'<text x="{x + 10}" y="{y + 20 + i * LINE}" font-weight="{bold}">{escape(line)}</text>'
        )
    return out


def _arrow(arrow: dict[str, Any]) -> list[str]:
    (x1, y1), (x2, y2) = arrow["from"], arrow["to"]
    out = [
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#333" stroke-width="1.4" '
        'marker-end="url(#head)"/>'
    ]
    if arrow.get("text"):
        # At the middle of the arrow, or where the source puts it (`at`) when that is crowded.
        x, y = arrow.get("at") or ((x1 + x2) / 2, (y1 + y2) / 2 - 5)
        out.append(
            f'<text x="{x:g}" y="{y:g}" text-anchor="middle" '
            f'font-size="11" fill="#333">{escape(arrow["text"])}</text>'
        )
    return out


def svg(source: dict[str, Any]) -> str:
    width, height = source["width"], source["height"]
    legend = source.get("legend") or []
    total = height + 20 + LINE * len(legend)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
        f'viewBox="0 0 {width} {total}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12">',
        "<defs>",
        '<marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" '
        'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker>',
        "</defs>",
        f'<rect width="{width}" height="{total}" fill="#ffffff"/>',
        f'<text x="20" y="26" font-size="15" font-weight="bold">{escape(source["title"])}</text>',
    ]
    for box in source["boxes"]:
        parts += _box(box)
    for arrow in source["arrows"]:
        parts += _arrow(arrow)
    for i, line in enumerate(legend):
        parts.append(f'<text x="20" y="{height + 15 + i * LINE}">{escape(line)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def diagram_text(source: Path = SOURCE) -> str:
    return svg(yaml.safe_load(source.read_text()))
