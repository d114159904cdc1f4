#!/usr/bin/env python3
"""Writes sqlite-docs.txt: the prose paragraphs of four pages of the SQLite
documentation (public domain; see README.md beside this file), from Debian
12's sqlite3-doc package:

  apt-get download sqlite3-doc && dpkg-deb -x sqlite3-doc_*.deb pkg
  python3 make_sqlite_docs_text.py pkg/usr/share/doc/sqlite3 > sqlite-docs.txt
  python3 make_sqlite_docs_text.py pkg/usr/share/doc/sqlite3 calibration \
      > sqlite-calibration.txt

The second, from four other pages, is the calibration text of `onecard
quantize --method gptq` in the accuracy table: no paragraph of it is in the
evaluation text.

Only <p> elements outside <pre>, <table>, <script> and <style>, with at least
eight words, whitespace collapsed; paragraphs separated by a blank line.
"""
import html.parser
import os
import re
import sys

PAGES = {
    "eval": ["atomiccommit.html", "testing.html", "howtocorrupt.html", "whentouse.html"],
    "calibration": ["queryplanner.html", "wal.html", "optoverview.html", "lockingv3.html"],
}
SKIPPED = ("script", "style", "pre", "table")


class Paragraphs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.paragraphs = []
        self.current = None
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            self.skip += 1
        if tag == "p" and not self.skip:
            self.current = []

    def handle_endtag(self, tag):
        if tag in SKIPPED:
            self.skip = max(0, self.skip - 1)
        if tag == "p" and self.current is not None:
            text = re.sub(r"\s+", " ", "".join(self.current)).strip()
            if len(text.split()) >= 8:
                self.paragraphs.append(text)
            self.current = None

    def handle_data(self, data):
        if self.current is not None and not self.skip:
            self.current.append(data)


def main():
    out = []
    for page in PAGES[sys.argv[2] if len(sys.argv) > 2 else "eval"]:
        parser = Paragraphs()
        with open(os.path.join(sys.argv[1], page), encoding="utf-8") as f:
            parser.feed(f.read())
        out.extend(parser.paragraphs)
    sys.stdout.write("\n\n".join(out) + "\n")


if __name__ == "__main__":
    main()
