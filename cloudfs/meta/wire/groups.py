"""A cache group's name and a member's address: the rules the tree service enforces and
its clients (mounts, workers, the CSI driver) check before they call."""

from __future__ import annotations

from cloudfs.errors import InvalidArgument

MAX_GROUP_NAME = 63
MAX_ADDRESS = 255
# Addresses that name every interface of the member's host, none that a peer can dial.
_WILDCARDS = {"0.0.0.0", "[::]", "::", "[::0]", ""}


def validate_group_name(name: str) -> None:
    """The volume-name rules: 1-63 letters, digits, '-', '_' or '.', not starting with '.'."""
    ok = 0 < len(name) <= MAX_GROUP_NAME and all(c.isalnum() or c in "-_." for c in name)
    if not ok or name.startswith(".") or not name.isascii():
        raise InvalidArgument(
            f"bad cache group name {name!r}: 1-{MAX_GROUP_NAME} letters, digits, '-', '_' or '.'"
        )


def validate_member_address(address: str) -> None:
    """A ``HOST:PORT`` other nodes can dial: a port 1-65535 and no wildcard host."""
    host, sep, port = address.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2
    plain = all(c.isalnum() or c in "-._" for c in host) and host.isascii()
    ok = (
        len(address) <= MAX_ADDRESS
        and sep == ":"
        and port.isdigit()
        and 0 < int(port) <= 65535
        and (bracketed or plain)
        and host not in _WILDCARDS
    )
    if not ok:
        raise InvalidArgument(
            f"bad cache group member {address!r}: HOST:PORT that other nodes can reach "
            "(a host name or address, not 0.0.0.0 or [::], and a port 1-65535)"
        )
