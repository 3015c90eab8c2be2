"""``cloudfs volume create|list|info|delete``: volumes of a directory-tree service.

    cloudfs volume create imagenet s3://datasets/imagenet --meta-server 10.0.0.5:7070
    cloudfs mount grpc://10.0.0.5:7070/imagenet /mnt/imagenet

``--meta-server`` defaults to ``$CLOUDFS_META_SERVER``, the token to the one in
``--meta-token-file`` or ``$CLOUDFS_META_TOKEN``. Deleting a volume deletes its tree
(modes, owners, xattrs, links); the UFS keeps every object. TLS to the tree
service: ``--meta-tls-ca`` (``--meta-tls-cert``/``--meta-tls-key`` for mTLS) or
``$CLOUDFS_TLS_*``; the flags every client of the tree shares are ``tree_flags.py``'s.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any

from cloudfs.cli.tree_flags import add_tree_flags, tree_target
from cloudfs.errors import InvalidArgument, UsageError
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.wire.volumes import VolumeSpec, validate_volume_name
from cloudfs.sizes import parse_mode, parse_seconds
from cloudfs.ufs.factory import validate_uri


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "volume", help="create, list, inspect or delete volumes", description=__doc__
    )
    sub = p.add_subparsers(dest="volume_command", required=True, metavar="COMMAND")
    create = sub.add_parser("create", help="a new volume over a UFS")
    create.add_argument("name")
    create.add_argument("ufs_uri", metavar="UFS_URI")
    create.add_argument("--meta-ttl", default="5", help="seconds before re-listing (5)")
    create.add_argument("--uid", default="0", help="owner of UFS files (0)")
    create.add_argument("--gid", default="0", help="group of UFS files (0)")
    create.add_argument("--file-mode", default="0644", help="mode of UFS files (0644)")
    create.add_argument("--dir-mode", default="0755", help="mode of UFS directories (0755)")
    sub.add_parser("list", help="every volume")
    info = sub.add_parser("info", help="one volume")
    info.add_argument("name")
    delete = sub.add_parser("delete", help="delete a volume's tree (not its UFS data)")
    delete.add_argument("name")
    for q in (create, info, delete, *[sub.choices["list"]]):
        add_tree_flags(q, client_only=True)
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    target = tree_target(args)
    client = VolumeClient(target.address, token=target.token, tls=target.tls)
    try:
        command = args.volume_command
        if command == "create":
            try:
                validate_volume_name(args.name)
            except InvalidArgument as e:
                raise UsageError(str(e)) from None
            validate_uri(args.ufs_uri)
            spec = VolumeSpec(
                name=args.name, ufs_uri=args.ufs_uri, meta_ttl=parse_seconds(args.meta_ttl),
                default_uid=_int(args.uid), default_gid=_int(args.gid),
                file_mode=parse_mode(args.file_mode), dir_mode=parse_mode(args.dir_mode),
            )  # fmt: skip
            _show([client.create(spec)], args.json)
        elif command == "list":
            _show(client.list(), args.json)
        elif command == "info":
            _show([client.get(args.name)], args.json)
        else:
            client.delete(args.name)
            print(f"deleted volume {args.name} (its UFS data is untouched)")
    finally:
        client.close()
    return 0


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"expected a number, got {text!r}") from None


def _show(volumes: list[VolumeSpec], as_json: bool) -> None:
    if as_json:
        print(json.dumps([asdict(v) for v in volumes], indent=2))
        return
    for v in volumes:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.created_ns / 1e9))
        print(
            f"{v.name}\t{v.ufs_uri}\tttl {v.meta_ttl:g}s\towner {v.default_uid}:{v.default_gid}"
            f"\tmodes {v.file_mode:o}/{v.dir_mode:o}\tcreated {created}"
        )
