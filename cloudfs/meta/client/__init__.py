"""The tree service's clients: ``GrpcMeta`` (the Meta protocol of one volume, for mounts and
fsspec), ``VolumeClient`` (volume admin), the channel and call rules they share
(``channel.py``), and the ``grpc://`` URIs that name a volume (``tree_uri.py``)."""
