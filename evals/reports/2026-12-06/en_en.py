"""The ranking's English-English offset apart from the en>zh one: exploration, not the
product (bare-facts-4.md, section 3). The third round scaled the three pair offsets together.

    python evals/reports/2026-12-06/en_en.py [--data ../shared/evaldata]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from variants_loader import V

# (offset_en_en, rank_offset_en_zh); the product's is the first.
GRID = [(-0.0416, 0.0235), (-0.03, 0.0235), (-0.02, 0.0235), (-0.01, 0.0235), (0.0, 0.0235),
        (-0.0416, 0.01), (-0.0416, 0.0), (-0.02, 0.01), (0.0, 0.0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    args = ap.parse_args()
    built = V.cases(args.data, round3=True)
    product = V.F.DEFAULT
    res = {}
    try:
        for ee, ez in GRID:
            V.F.DEFAULT = replace(product, offset_en_en=ee, rank_offset_en_zh=ez)
            for name, case in built.items():
                res[(ee, ez, name)] = V.r5(case, lambda row, c=case: V.rank(row, c, {}, []))
    finally:
        V.F.DEFAULT = product
    print("| set | split | " + " | ".join(f"en_en {ee:g}, en>zh {ez:g}" for ee, ez in GRID)
          + " |")
    print("|---|---|" + "---|" * len(GRID))
    for name in built:
        for split in sorted(res[(*GRID[0], name)]):
            cells = " | ".join(f"{res[(ee, ez, name)][split]:.3f}" for ee, ez in GRID)
            print(f"| {name} | {split} | {cells} |")


if __name__ == "__main__":
    main()
