#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md: every `](path)` or
`](path#anchor)` must name a file or directory of the repository, and every
anchor a heading of its target (GitHub's slugs). Web links are not checked.

Usage: scripts/check-doc-links.py [--allow-missing PATH ...]
Exits 1 and lists the broken links, 0 when all resolve (ctest docs_links)."""

import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ALLOW_MISSING = set()
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces to dashes."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def main(argv):
    allow = set(ALLOW_MISSING)
    if argv[:1] == ["--allow-missing"]:
        allow |= set(argv[1:])
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    bad = []
    n = 0
    for f in files:
        text = FENCE.sub("", open(f, encoding="utf-8").read())
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            n += 1
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            rel = os.path.relpath(full, ROOT)
            where = os.path.relpath(f, ROOT)
            if not os.path.exists(full):
                if rel not in allow:
                    bad.append(f"{where}: {target}: no such file")
                continue
            if frag and full.endswith(".md") and frag not in anchors(full):
                bad.append(f"{where}: {target}: no heading #{frag}")
    for b in bad:
        print(b)
    print(f"check-doc-links: {n} relative links in {len(files)} files, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
