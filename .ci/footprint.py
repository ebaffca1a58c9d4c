#!/usr/bin/env python3
"""The footprint budget: every row of a budget table measured now must be in README.md, and
none of its figures more than 5% above the README's.

Usage: footprint.py MEASURED.md [README.md]
       footprint.py --self-test

MEASURED.md is the output of a budget script (`examples/firmware/budget.sh --footprint`,
`runtime/capi/examples/firmware/budget.sh`). A row is keyed by its cells that are not figures
(the part, the logging); its figures are the leading integers of the other cells ("15740
(15.4 KiB)" is 15740). A row the README lacks, or a figure that grew by more than 5% while the
README kept the old one, fails: a change that costs flash must say so in the README's table, in
the same commit. A figure that shrank by more than 5% is reported (the README is then stale) but
does not fail.
"""

import re
import sys

GROWTH = 1.05
FIGURE = re.compile(r"^\s*(\d+)\b")


def rows(text):
    """The Markdown table rows of `text`, as {key: [figures]}."""
    table = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        key, figures = [], []
        for cell in cells:
            match = FIGURE.match(cell)
            if match:
                figures.append(int(match.group(1)))
            else:
                key.append(cell)
        if figures:
            table.setdefault(tuple(key), figures)
    return table


def compare(measured, readme, readme_path):
    """The failures of `measured` against `readme` (both from `rows`); prints the stale rows."""
    failures = []
    for key, figures in measured.items():
        label = " | ".join(key)
        if key not in readme:
            failures.append(f"{label}: measured {figures}, no such row in {readme_path}")
            continue
        kept = readme[key]
        if len(kept) != len(figures):
            failures.append(f"{label}: measured {figures}, {readme_path} has {kept}")
            continue
        for now, before in zip(figures, kept):
            if now > before * GROWTH:
                failures.append(
                    f"{label}: {now} is {100 * (now / before - 1):.1f}% above the {before} of "
                    f"{readme_path} (at most 5%): update the table with the change"
                )
            elif now < before / GROWTH:
                print(f"footprint: {label}: {now} is below the {before} of {readme_path} "
                      "(the table is stale)")
    return failures


def self_test():
    """The check fails on a grown figure, a missing row and a changed shape, and passes within
    5% and on a shrink."""
    readme = rows("| part | logging | .text | all |\n|---|---|---|---|\n"
                  "| stream | plain | 1000 | 2000 (2.0 KiB) |\n")
    def failures(line):
        return compare(rows(line), readme, "README")
    assert failures("| stream | plain | 1050 | 2100 (2.1 KiB) |") == []
    assert failures("| stream | plain | 900 | 1500 (1.5 KiB) |") == []
    assert len(failures("| stream | plain | 1051 | 2000 (2.0 KiB) |")) == 1
    assert len(failures("| stream | plain | 1100 | 2200 (2.1 KiB) |")) == 2
    assert len(failures("| stream | defmt | 1000 | 2000 (2.0 KiB) |")) == 1
    assert len(failures("| stream | plain | 1000 |")) == 1
    print("footprint: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    measured = rows(open(sys.argv[1], encoding="utf-8").read())
    readme_path = sys.argv[2] if len(sys.argv) == 3 else "README.md"
    readme = rows(open(readme_path, encoding="utf-8").read())
    if not measured:
        sys.exit(f"footprint: no table rows in {sys.argv[1]}")
    failures = compare(measured, readme, readme_path)
    for failure in failures:
        print(f"footprint: {failure}", file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"footprint: {len(measured)} rows within 5% of {readme_path}")


if __name__ == "__main__":
    main()
