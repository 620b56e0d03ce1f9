"""Text helpers shared by tests."""


def flat(text: str) -> str:
    """``text`` with every run of whitespace made one space (a printed table compared by its words)."""
    return " ".join(text.split())
