"""What the tests and the benchmarks share: servers started on loopback (moto, etcd, the tree
service, cache workers, Prometheus), real FUSE mounts, certificates, fault proxies and tree
checks. Neither tests/ nor benchmarks/ imports the other; both import this."""
