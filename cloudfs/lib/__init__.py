"""Helpers shared by several packages, at the bottom of the import graph: they import only the
leaves (``errors``, ``metrics``, ``tls``, ``tokens``...) and the standard library."""
