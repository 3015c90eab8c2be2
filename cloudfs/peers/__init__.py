"""Cache groups: each block leaves the object store once per group, not once per mount.

A mount given ``--cache-group`` or ``--cache-peers`` asks each block it
misses of the group member that owns it (``ring.py``: rendezvous hashing)
before it goes to the UFS itself (``client.py``: the ``PeerTier`` the loader
is given; ``health.py``: members that fail are left out for a while).
Members are cache workers (``cloudfs cache serve``) and mounts serving their
own cache: ``server.py`` serves ``worker.py``, which finds a block in its
memory and disk tiers or fetches it from the object store once for all its
callers (``flights.py``), from stores it opens per URI (``stores.py``).
``membership.py`` joins, leaves and lists the groups the tree service keeps.
``wire.py`` holds what both ends of a block transfer (HTTP/1.1) agree on;
``transport.py`` runs a mount's calls at once over keep-alive connections.
"""
