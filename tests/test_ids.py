"""Job and run ids (SPEC DB-03): time-ordered UUIDv7s, unique across processes forked from one
parent even when a compiled generator keeps its random state in the process (issue 28)."""

from __future__ import annotations

import os
import uuid

from django_xjobs.ids import uuid7, uuid7_many

#: the 62 random bits at the end of a UUIDv7: a forked child and its parent must differ here
_RANDOM = (1 << 62) - 1


def _child_ids(count: int) -> list[uuid.UUID]:
    """``count`` ids minted in a child forked from this process, read back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its ids and leave at once, running no test teardown
        try:
            os.write(write, b"".join(u.bytes for u in uuid7_many(count)))
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return [uuid.UUID(bytes=data[i : i + 16]) for i in range(0, len(data), 16)]


def test_a_forked_child_mints_ids_of_its_own_not_its_parents():
    uuid7()  # the generator's state exists before the fork, as in a preforking server
    child = _child_ids(50)
    parent = uuid7_many(50)
    assert len(child) == 50
    assert not {u.int & _RANDOM for u in child} & {u.int & _RANDOM for u in parent}
    assert not set(child) & set(parent)


def test_single_ids_and_batches_share_one_increasing_order():
    """SPEC DB-03: every id is a version 7 UUID, so ids sort by creation."""
    ids = [uuid7(), *uuid7_many(1000), uuid7(), *uuid7_many(3), uuid7()]
    assert ids == sorted(set(ids))
    assert {u.version for u in ids} == {7}


def test_shard_12_a_derived_uuid7_is_the_same_for_the_same_arguments():
    from django_xjobs.ids import uuid7_for

    one = uuid7_for(1_767_225_600_000, "tests.daily", "0")
    assert one == uuid7_for(1_767_225_600_000, "tests.daily", "0")
    assert one != uuid7_for(1_767_225_600_000, "tests.daily", "1")
    assert one != uuid7_for(1_767_225_600_001, "tests.daily", "0")
    assert (one.version, one.variant) == (7, uuid.RFC_4122)
    assert one.int >> 80 == 1_767_225_600_000  # its time is the occurrence's
