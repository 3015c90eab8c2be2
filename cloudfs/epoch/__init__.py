"""Trainer integration, the mount's side: jobs announce each epoch's file order.

A data loader knows the whole epoch before it reads a sample
(``cloudfs.torch.CloudFSSampler``, ``cloudfs.hints.announce``, ``cloudfs
hint``). It sends the order to the mount over the hints socket; the mount then

* fetches a window of files ahead of the reader's position in that order
  (``prefetch.py``), with many GETs in flight, within a byte budget;
* ranks every cached block by its next use in the announced future, so the
  disk tier evicts the block needed farthest away (``ranks.py``, Belady's rule
  in ``cloudfs.cache.belady``);
* follows where each job is (``order.py``: the reads it sees, tolerant of the
  reordering that several loader workers cause) and reports per job: data
  stalls, files and bytes, hit ratio, prefetch lead, and the fraction of the
  next epoch already cached (``telemetry.py``).

``board.py`` holds the live jobs; ``hint_ops.py`` serves the socket.
"""
