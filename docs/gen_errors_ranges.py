"""Regenerate the "Ranges per op" table of docs/errors.md from the registry's Param ranges.

    python docs/gen_errors_ranges.py          # rewrite the table in docs/errors.md
    python docs/gen_errors_ranges.py --check  # exit 1 (and say so) when the file is out of date

The table lies between the ``<!-- ranges: ... -->`` and ``<!-- /ranges -->`` markers; it is built
by :func:`gpuaug._registry.ranges_table` from each op's ``Param(low=, high=, choices=, ...)`` and
``OpSpec(range_notes=)``. tests/test_bad_input.py::test_docs_errors_md_ranges_match_the_specs
fails when the file and the specs disagree.
"""
from __future__ import annotations

import os
import sys

BEGIN = "<!-- ranges: generated from the registry by docs/gen_errors_ranges.py; do not edit -->"
END = "<!-- /ranges -->"
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "errors.md")


def split(text):
    """(before, table, after) of errors.md's text around the generated table."""
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:i], text[i:j], text[j:]


def expected(text):
    """The file's text with the table regenerated from the registry."""
    from gpuaug._registry import ranges_table

    before, _, after = split(text)
    return before + "\n" + "\n".join(ranges_table()) + "\n" + after


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(PATH, encoding="utf-8") as f:
        text = f.read()
    want = expected(text)
    if "--check" in argv:
        if want != text:
            print(f"{PATH}: the per-op ranges are out of date; run python docs/gen_errors_ranges.py")
            return 1
        return 0
    if want != text:
        with open(PATH, "w", encoding="utf-8") as f:
            f.write(want)
        print(f"rewrote the per-op ranges in {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
