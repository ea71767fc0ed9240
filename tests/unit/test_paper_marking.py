"""One marking across the book for what is the paper's and what is ours (book/intro.md documents it): every
box that states the paper's theorems, captions or response carries exactly one of the three classes, and
a box of the paper's own words is a quotation."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKINGS = ("paper-quote", "paper-claim", "our-reading")
# A directive (``` or ::: fenced) with its title, its options and its body.
_BOX = re.compile(r"^(?P<fence>```|:{3,})\{(?P<kind>prf:\w+|admonition)\}(?P<title>[^\n]*)\n"
                  r"(?P<options>(?::\w+:[^\n]*\n)*)"
                  r"(?P<body>.*?)^(?P=fence)\s*$", re.M | re.S)
_ABOUT_THE_PAPER = re.compile(r"\bthe paper\b|\bthe authors\b|caption|response|Theorem|Proposition|Corollary")


def _boxes() -> list[tuple[str, str, set[str], str]]:
    """(file, title, classes, body) of every directive box of the book's pages."""
    found = []
    for page in sorted((ROOT / "book").rglob("*.md")):
        for box in _BOX.finditer(page.read_text()):
            classes = (set(re.findall(r"^:class:\s*(.*)$", box["options"], re.M)[0].split())
                       if ":class:" in box["options"] else set())
            found.append((str(page.relative_to(ROOT)), box["title"].strip(), classes, box["body"].strip()))
    return found


def test_the_intro_documents_each_marking():
    intro = [(title, classes) for page, title, classes, _ in _boxes() if page == "book/intro.md"]
    assert {m for _, classes in intro for m in classes & set(MARKINGS)} == set(MARKINGS)


def test_every_box_about_the_paper_carries_one_marking():
    boxes = [(page, title, classes) for page, title, classes, _ in _boxes()
             if page != "book/intro.md"
             and (title.startswith(("Theorem", "Proposition")) or _ABOUT_THE_PAPER.search(title))]
    assert len(boxes) >= 8  # the four theory statements, three captions, the response
    unmarked = [(page, title) for page, title, classes in boxes if len(classes & set(MARKINGS)) != 1]
    assert not unmarked, f"boxes about the paper without exactly one of {MARKINGS}: {unmarked}"


def test_the_papers_words_are_quoted():
    quotes = [(page, body) for page, _, classes, body in _boxes()
              if "paper-quote" in classes and page != "book/intro.md"]
    assert quotes and all(body.startswith('"') and body.endswith('"') for _, body in quotes), quotes
