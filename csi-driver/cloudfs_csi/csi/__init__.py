"""The CSI v1 protocol (generated stubs in csi.v1)."""
