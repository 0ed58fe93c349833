"""Make the README's dashboard picture from the 160x48 snapshot test's SVG.

    python -m tests.dash.screenshot      (just dash-screenshot)

The picture is the snapshot converted to PNG (cairosvg), so it shows exactly what the
snapshot test checks. docs/dash.png.source records the SVG's sha256, and
test_snapshots.py fails when the snapshot changed but the picture was not remade.
The SVG asks for the Fira Code font; it is swapped for DejaVu Sans Mono, which Debian
ships, so the columns line up where Fira Code is not installed.
"""

import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SVG = os.path.join(HERE, "__snapshots__", "test_snapshots", "test_main_layout[160x48].svg")
PNG = os.path.join(ROOT, "docs", "dash.png")
SOURCE = PNG + ".source"


def svg_digest() -> str:
    with open(SVG, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> int:
    try:
        import cairosvg
    except (ImportError, OSError) as err:
        print(f"needs cairosvg and libcairo2 (pip install cairosvg): {err}", file=sys.stderr)
        return 1
    with open(SVG, encoding="utf-8") as f:
        svg = f.read().replace("Fira Code, monospace", "DejaVu Sans Mono, monospace")
    cairosvg.svg2png(bytestring=svg.encode(), write_to=PNG)
    with open(SOURCE, "w") as f:
        f.write(svg_digest() + "  " + os.path.relpath(SVG, ROOT) + "\n")
    print(f"wrote {os.path.relpath(PNG, ROOT)} from {os.path.relpath(SVG, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
