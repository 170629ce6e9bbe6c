"""The release, in the one place hatch reads it from (the package root and the stores import it)."""

__version__ = "0.1.0"
