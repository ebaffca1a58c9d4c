#!/usr/bin/env python3
"""The footprint budget: every row of a budget table measured now must be in README.md, and
none of its figures more than 5% above the README's.

Usage: footprint.py MEASURED.md [README.md]
       footprint.py --self-test

MEASURED.md is the output of a budget script (`examples/firmware/budget.sh --footprint`,
`runtime/capi/examples/firmware/budget.sh`). A row is keyed by its cells that are not figures
(the part, the logging) and by its table's header row, which the README copies; its figures are
the leading integers of the other cells ("15740 (15.4 KiB)" is 15740). A row the README lacks, or a figure that grew by more than 5% while the
README kept the old one, fails: a change that costs flash must say so in the README's table, in
the same commit. A figure that shrank by more than 5% is reported (the README is then stale) but
does not fail.
"""

import re
import sys

GROWTH = 1.05
FIGURE = re.compile(r"^\s*(\d+)\b")


def rows(text):
    """The Markdown table rows of `text`, as {(table header, row key): [figures, ...]}: a row is
    keyed by its table's header row and its cells that are not figures; a key may repeat."""
    table = {}
    lines = [line.strip() for line in text.splitlines()]
    header = None
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            header = None
            continue
        if set(line) <= set("|-: "):
            continue
        if header is None:
            # A table's first row is its header when the separator follows.
            if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
                header = " ".join(line.split())
                continue
            header = ""
        cells = [c.strip() for c in line.strip("|").split("|")]
        key, figures = [], []
        for cell in cells:
            match = FIGURE.match(cell)
            if match:
                figures.append(int(match.group(1)))
            else:
                key.append(cell)
        if figures:
            table.setdefault((header, tuple(key)), []).append(figures)
    return table


def compare(measured, readme, readme_path, report=print):
    """The failures of `measured` against `readme` (both from `rows`); `report`s the stale rows."""
    failures = []
    for (header, cells), measured_rows in measured.items():
        label = " | ".join(cells)
        if len(measured_rows) > 1:
            failures.append(f"{label}: {len(measured_rows)} measured rows share this key")
            continue
        figures = measured_rows[0]
        kept_rows = readme.get((header, cells), [])
        if len(kept_rows) != 1:
            failures.append(
                f"{label}: measured {figures}; {readme_path} has {len(kept_rows)} such rows "
                f"under the header {header!r} (needs exactly one)"
            )
            continue
        kept = kept_rows[0]
        # A measured row may stop early (`--footprint` skips the comparison columns); the
        # figures it has are compared with the README's first ones.
        if len(figures) > len(kept):
            failures.append(f"{label}: measured {figures}, {readme_path} has {kept}")
            continue
        for now, before in zip(figures, kept[: len(figures)]):
            if now > before * GROWTH:
                failures.append(
                    f"{label}: {now} is {100 * (now / before - 1):.1f}% above the {before} of "
                    f"{readme_path} (at most 5%): update the table with the change"
                )
            elif now < before / GROWTH:
                report(f"footprint: {label}: {now} is below the {before} of {readme_path} "
                       "(the table is stale)")
    return failures


def self_test():
    """The check fails on a grown figure, a missing row and a row longer than the README's, and
    passes within 5%, on a shrink and on a row that stops early."""
    readme = rows("| part | logging | .text | all |\n|---|---|---|---|\n"
                  "| stream | plain | 1000 | 2000 (2.0 KiB) |\n")
    def failures(line):
        return compare(rows("| part | logging | .text | all |\n|---|---|---|---|\n" + line),
                       readme, "README", report=lambda _: None)
    assert failures("| stream | plain | 1050 | 2100 (2.1 KiB) |") == []
    assert failures("| stream | plain | 900 | 1500 (1.5 KiB) |") == []
    assert len(failures("| stream | plain | 1051 | 2000 (2.0 KiB) |")) == 1
    assert len(failures("| stream | plain | 1100 | 2200 (2.1 KiB) |")) == 2
    assert len(failures("| stream | defmt | 1000 | 2000 (2.0 KiB) |")) == 1
    assert failures("| stream | plain | 1000 |") == []
    assert len(failures("| stream | plain | 1100 |")) == 1
    assert len(failures("| stream | plain | 1000 | 2000 | 3000 |")) == 1
    assert len(failures("| stream | plain | 1000 |\n| stream | plain | 1000 |")) == 1
    other = rows("| part | logs | .text | all |\n|---|---|---|---|\n| stream | plain | 1000 | 1 |")
    assert len(compare(other, readme, "README", report=lambda _: None)) == 1
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
