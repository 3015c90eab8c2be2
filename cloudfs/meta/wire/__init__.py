"""The tree service's wire: what its gRPC service (``meta/service/``) and its clients
(``meta/client/``, the CSI driver, the CLI) both speak, so neither imports the other."""
