"""Sidecar mode: the FUSE client injected into the training pod by a mutating webhook.

See docs/csi.md ("Node mode or sidecar mode"). ``settings.py`` (the opt-in label,
the annotations, the webhook's own settings), ``volumes.py`` (a pod's CloudFS
volumes from its PVCs, their PVs and secrets), ``containers.py`` (one native
sidecar per volume), ``patch.py`` (the pod as patched, and the JSONPatch),
``review.py`` (AdmissionReview v1 in and out), ``server.py`` (HTTPS),
``probe.py`` (the startup probe: every mount answers).
"""
