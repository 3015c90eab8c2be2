"""CloudFS: a caching POSIX filesystem for machine-learning training data."""

__version__ = "0.1.0"
