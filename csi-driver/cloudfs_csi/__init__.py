"""CloudFS CSI driver: CloudFS volumes mounted into Kubernetes pods.

The plugin serves the CSI v1 Identity, Controller and Node services on one
UNIX socket. The controller provisions a volume on the directory-tree service
per PersistentVolume; the node stages one ``cloudfs mount`` (its own process,
so a driver restart leaves it running) per volume and bind-mounts it into each
pod, and repairs both when the FUSE process dies.
"""

DRIVER_NAME = "csi.cloudfs.io"
VERSION = "0.1.0"
