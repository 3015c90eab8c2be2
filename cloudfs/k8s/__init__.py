"""Kubernetes scheduling: a kube-scheduler extender that places pods where their data is cached.

``wire.py`` reads and writes the extender protocol's JSON; ``pod_volumes.py``
finds a pod's CloudFS volumes (annotation, inline CSI volumes, PVC -> PV
through ``kube_api.py``); ``extender.py`` filters and scores; ``http.py``
serves it. See docs/kubernetes-scheduling.md.
"""
