"""Where the repository is, for tests that run its scripts or read its configs, from any folder under tests/."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
