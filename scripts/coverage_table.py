"""Line coverage of the product code, per package and for the least-covered modules, from
the data file the test run wrote (.coverage: scripts/test.sh measures the unit and emulated
tiers with pytest-cov; [tool.coverage] in pyproject.toml says what is measured)."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import coverage
from coverage.exceptions import NoDataError

ROOT = Path(__file__).resolve().parent.parent
LEAST = 12


def main() -> int:
    cov = coverage.Coverage(data_file=str(ROOT / ".coverage"))
    cov.load()
    per_package: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_module: list[tuple[float, str, int, int]] = []
    try:
        files = cov.get_data().measured_files()
    except NoDataError:
        print("no coverage data: run the tests with coverage first (bash scripts/test.sh)")
        return 1
    for name in sorted(files):
        path = Path(name)
        try:
            relative = path.resolve().relative_to(ROOT)
        except ValueError:
            continue
        _, statements, _, missing, _ = cov.analysis2(str(path))
        if not statements:
            continue
        package = "/".join(relative.parts[:-1]) or "."
        covered = len(statements) - len(missing)
        per_package[package][0] += covered
        per_package[package][1] += len(statements)
        per_module.append((covered / len(statements), str(relative), covered, len(statements)))
    total = [sum(v[0] for v in per_package.values()), sum(v[1] for v in per_package.values())]
    print(f"{'package':<28} {'lines':>7} {'covered':>8}")
    for package, (covered, statements) in sorted(per_package.items()):
        print(f"{package:<28} {statements:>7} {100 * covered / statements:>7.1f}%")
    print(f"{'all product code':<28} {total[1]:>7} {100 * total[0] / max(total[1], 1):>7.1f}%")
    print(f"\nthe {LEAST} least-covered modules:")
    for share, module, covered, statements in sorted(per_module)[:LEAST]:
        print(f"  {module:<52} {covered:>5}/{statements:<5} {100 * share:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
