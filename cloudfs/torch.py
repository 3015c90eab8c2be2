"""``cloudfs.torch``: the public import path of the PyTorch sampler.

    from cloudfs.torch import CloudFSSampler

It lives with the rest of the trainer integration's client side, in
``cloudfs/hints/sampler.py``; importing this module imports torch.
"""

from __future__ import annotations

from cloudfs.hints.sampler import CloudFSSampler

__all__ = ["CloudFSSampler"]
