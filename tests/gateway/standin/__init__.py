"""TEMPORARY stand-ins for ``cloudfs.gateway.sigv4`` and ``payload`` (written in parallel
elsewhere), used by ``launch.py`` only while those modules are missing from the tree.
They check header-signed SigV4 for real and frame nothing but aws-chunked bodies."""
