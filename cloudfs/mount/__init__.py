"""The mount as a library: everything a mount is built from, assembled from a ``MountConfig``
(``assembly.mount_filesystem``) and torn down in reverse on one ``ExitStack``. The command line
(``cloudfs/cli/``), the CSI driver and fsspec use it; it never imports them."""
