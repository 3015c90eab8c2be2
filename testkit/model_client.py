"""A client of the model-based concurrency test: random changes, and the model they imply.

Each client process (``testkit.stress_client.run_clients``) works through one
tree server (``GrpcMeta``) on a world the test set up: shared directories
(never moved), and one directory per client with a subdirectory in it. What a
client changes is its own (its files, its directory), so the outcome of each
of its calls tells exactly what the tree must hold of it afterwards, whatever
the other clients did meanwhile: the client keeps that as its model. The
clients still collide everywhere that matters: they create and rename into
the same directories, move their directories into each other's (and try
into their own subtrees, directly or through another client's directory,
which must fail with EINVAL or succeed without making a cycle), and race to
create the same "hot" names, of which exactly one creator may win.

The model a client returns (``Outcome.extra["model"]``):

* ``files``: file name -> (directory label, name), for every file it holds;
* ``dir``: its directory's parent label;
* ``hot``: the hot names it created and still holds.

Directory labels: ``S0``...: the shared directories; ``own-N`` and
``own-N/sub``: client N's directory and its subdirectory.
"""

from __future__ import annotations

import errno
import random
from typing import Any

from testkit.stress_client import FILE, Client, Outcome

HOT_NAMES = 4
NONE: set[int] = set()  # a client's own file: no error is right
INTO_ITSELF = {errno.EINVAL}  # a directory moved into its own subtree (maybe through another's)
TAKEN = {errno.EEXIST}  # a hot name another client holds


def modelled(
    address: str, volume: str, tag: str, seed: int, dirs: dict[str, int], ops: int
) -> Outcome:
    """``ops`` random changes by client ``tag`` (an integer as text); ``dirs``: label -> inode."""
    rng = random.Random(seed)
    c = Client(address, volume, f"model-{tag}", timeout=30.0)
    me = f"own-{tag}"
    files: dict[bytes, tuple[str, bytes]] = {}  # my file's unique id -> where it is now
    hot: set[bytes] = set()
    parent = "root"  # of my directory
    labels = sorted(dirs)
    made = 0
    try:
        for _ in range(ops):
            roll = rng.random()
            if roll < 0.35 or not files:
                made += 1
                fid = f"f-{tag}-{made}".encode()
                where = rng.choice(labels)
                if c.call("create", c.meta.create, dirs[where], fid, FILE, 0, 0, expected=NONE):
                    files[fid] = (where, fid)
            elif roll < 0.6:
                fid = rng.choice(sorted(files))
                where, name = files[fid]
                to = rng.choice(labels)
                new = f"{fid.decode()}.r{rng.randint(0, 99)}".encode()
                if c.call("rename", c.meta.rename, dirs[where], name, dirs[to], new, expected=NONE):
                    files[fid] = (to, new)
            elif roll < 0.72:
                fid = rng.choice(sorted(files))
                where, name = files.pop(fid)
                if not c.call("unlink", c.meta.unlink, dirs[where], name, expected=NONE):
                    files[fid] = (where, name)
            elif roll < 0.87:
                to = rng.choice([x for x in labels if x not in (me, parent)])
                moved = c.call(
                    "move-dir", c.meta.rename, dirs[parent], me.encode(), dirs[to], me.encode(),
                    expected=INTO_ITSELF,
                )  # fmt: skip
                if moved:
                    parent = to
            else:
                name = f"hot-{rng.randrange(HOT_NAMES)}".encode()
                if name in hot:
                    if c.call("hot-unlink", c.meta.unlink, dirs["S0"], name, expected=NONE):
                        hot.discard(name)
                elif c.call(
                    "hot-create", c.meta.create, dirs["S0"], name, FILE, 0, 0, expected=TAKEN
                ):
                    hot.add(name)
    finally:
        c.close()
    model: dict[str, Any] = {"files": files, "dir": parent, "hot": sorted(hot)}
    c.out.extra["model"] = model
    c.out.extra["tag"] = tag
    return c.out

