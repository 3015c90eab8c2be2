"""The ``-o name[=value]`` vocabulary of a mount: each option's name, the ``cloudfs mount``
flag it stands for (its argparse dest), and whether it takes a value; and the options only
mount(8) cares about, accepted and ignored. fstab (``cli/mount_options.py``) and the CSI
driver's mount-option checks read the same table."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from cloudfs.errors import UsageError

# -o name -> (argparse dest, takes a value)
O_OPTIONS: dict[str, tuple[str, bool]] = {
    "ro": ("read_only", False),
    "read_only": ("read_only", False),
    "allow_other": ("allow_other", False),
    "foreground": ("foreground", False),
    "debug": ("debug", False),
    "cache_dir": ("cache_dir", True),
    "cache_size": ("cache_size", True),
    "block_cache_dirs": ("block_cache_dirs", True),
    "free_space_ratio": ("free_space_ratio", True),
    "cache_policy": ("cache_policy", True),
    "memory_cache_size": ("memory_cache_size", True),
    "block_size": ("block_size", True),
    "readahead_blocks": ("readahead_blocks", True),
    "readahead_mode": ("readahead_mode", True),
    "order_window_files": ("order_window_files", True),
    "order_window_size": ("order_window_size", True),
    "order_parallel": ("order_parallel", True),
    "job_series_grace": ("job_series_grace", True),
    "meta_ttl": ("meta_ttl", True),
    "dataset_mode": ("dataset_mode", True),
    "uid": ("uid", True),
    "gid": ("gid", True),
    "file_mode": ("file_mode", True),
    "dir_mode": ("dir_mode", True),
    "s3_endpoint": ("s3_endpoint", True),
    "s3_region": ("s3_region", True),
    "s3_timeout": ("s3_timeout", True),
    "log_file": ("log_file", True),
    "metrics": ("metrics", True),
    "write_mode": ("write_mode", True),
    "upload_delay": ("upload_delay", True),
    "upload_deadline": ("upload_deadline", True),
    "upload_concurrency": ("upload_concurrency", True),
    "drain_timeout": ("drain_timeout", True),
    "staging_dir": ("staging_dir", True),
    "token_file": ("token_file", True),
    "cache_peers": ("cache_peers", True),
    "cache_token_file": ("cache_token_file", True),
    "cache_group_serve_cert": ("cache_group_serve_cert", True),
    "cache_group_serve_key": ("cache_group_serve_key", True),
    "tls_ca": ("tls_ca", True),
    "tls_cert": ("tls_cert", True),
    "tls_key": ("tls_key", True),
    "cache_group": ("cache_group", True),
    "cache_group_serve": ("cache_group_serve", True),
    "staging_size": ("staging_size", True),
    "staging_wait": ("staging_wait", True),
    "no_local_blocks": ("no_local_blocks", False),
    "take_over_dead_mount": ("take_over_dead_mount", False),
}
IGNORED = {
    "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail",
    "exec", "noexec", "suid", "nosuid", "dev", "nodev", "async", "atime", "relatime",
    "noatime", "nodiratime", "default_permissions",
}  # fmt: skip


def o_items(flags: Iterable[str], owned: Collection[str] = ()) -> list[str]:
    """``mountOptions`` entries (each ``a,b=c`` or one item) as ``cloudfs mount -o`` items:
    mount(8)'s own dropped, the rest known and of the right form, none of ``owned`` (the
    options whoever starts the mount sets itself). ``UsageError`` names the option, never
    its value (a value may be secret)."""
    out: list[str] = []
    for flag in flags:
        for item in filter(None, (part.strip() for part in flag.split(","))):
            name, sep, _ = item.partition("=")
            if name in IGNORED:
                continue
            if name in owned:
                raise UsageError(f"mount option {name!r} is set by CloudFS itself")
            spec = O_OPTIONS.get(name)
            if spec is None:
                raise UsageError(f"unknown mount option {name!r}")
            if spec[1] != bool(sep):
                raise UsageError(f"mount option {name!r}: bad value form")
            out.append(item)
    return out
