"""System-1 Gateway: fast multiple-choice decisions from a local engine, calibrated, with
abstention and a fallback chain."""

__version__ = "0.3.0"
