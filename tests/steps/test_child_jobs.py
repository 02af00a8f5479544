"""Child jobs from a step (issue 32) on both drivers: ``ctx.step.call``/``call_many`` enqueue
each child once, park the parent, and resume it with the results in input order or a typed
error (docs/concepts/workflows.md, "Child jobs")."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from django.utils import timezone

from django_xjobs import ChildJobFailedError, cancel_job, publish_event
from django_xjobs.clock import FrozenClock
from django_xjobs.drivers.contract import Complete, StepRecord, SuspendUntil
from django_xjobs.errors import (
    CODES,
    ChildDepthError,
    InvariantError,
    StepReplayMismatchError,
    StepSuspension,
)
from django_xjobs.ids import uuid7_many
from django_xjobs.run.execution import Outcome
from django_xjobs.steps import children as children_module
from django_xjobs.steps.children import MAX_CHILD_DEPTH
from django_xjobs.testing import run_to_completion, run_until_idle
from django_xjobs.worker.worker import Worker
from tests import jobs
from tests.models import Ledger
from tests.steps.test_steps import claimed_steps, steps_for, steps_of


@pytest.fixture
def clock():
    return FrozenClock(timezone.now())


def _children(harness):
    return harness.driver.reads().list_jobs(name="tests.jobs.child_square")


def test_a_parent_with_3_children_resumes_with_their_results_in_input_order(harness, clock):
    """SPEC CHILD-01, CHILD-03: the parent parks without spending an attempt, and resumes with
    its children's results in input order."""
    parent = jobs.parent_calls.enqueue(tag="p", ns=[3, 1, 2]).id
    runs = run_to_completion(parent, clock=clock)
    assert runs[0].job.id == parent and runs[0].outcome == Outcome.SUSPENDED
    assert harness.row(parent).result == {"results": [{"square": 9}, {"square": 1}, {"square": 4}]}
    assert len(_children(harness)) == 3 and Ledger.objects.filter(phase="ran").count() == 3
    assert Ledger.objects.filter(token="p", phase="resumed").count() == 1
    step = steps_of(harness, parent)["call_many:tests.jobs.child_square"]
    assert step.status == "completed"
    assert sorted(step.output["children"]) == sorted(str(c.id) for c in _children(harness))
    assert harness.row(parent).attempt == 1  # parked, never retried (SPEC STEP-10)


def test_child_01_the_first_call_records_new_ids_then_enqueues_each_child_under_its_own(
    harness, clock
):
    """SPEC CHILD-01: reached the first time, ``call_many`` writes a ``waiting`` record naming
    a new id per input, enqueues each child under the id at its index with the key
    ``xjobs.child:<parent job id>:<step>:<index>``, and parks the run (a suspension)."""
    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="c1", ns=[4, 5, 6])
    name = "call_many:tests.jobs.child_square"
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, [{"n": n} for n in (4, 5, 6)])
    record = steps_of(harness, job.id)[name]
    assert (record.status, record.output["kind"], record.output["job"]) == (
        "waiting",
        "call_many",
        "tests.jobs.child_square",
    )
    recorded = [uuid.UUID(i) for i in record.output["children"]]
    assert len(set(recorded)) == 3 and job.id not in recorded
    for index, (child_id, n) in enumerate(zip(recorded, (4, 5, 6), strict=True)):
        child = harness.row(child_id)
        assert (child.name, child.input["n"], child.state) == (
            "tests.jobs.child_square",
            n,
            "ready",
        )
        assert child.idempotency_key == f"xjobs.child:{job.id}:{name}:{index}"
    assert len(_children(harness)) == 3


def test_a_replay_of_the_parent_step_enqueues_no_child_again(harness, clock):
    """SPEC CHILD-02: a replay reads the ids from the record and adds no child; each child's key
    is ``xjobs.child:<parent>:<step>:<index>`` (CHILD-01)."""
    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="r", ns=[1, 2, 3])
    inputs = [{"n": n} for n in (1, 2, 3)]
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, inputs)
    first = {c.id for c in _children(harness)}
    assert len(first) == 3
    # the next attempt of the same run reads the step's record and finds the same children
    _, again, _ = steps_for(harness, job)
    with pytest.raises(StepSuspension):
        again.call_many(jobs.child_square, inputs)
    assert {c.id for c in _children(harness)} == first
    keys = {c.idempotency_key for c in _children(harness)}
    assert keys == {f"xjobs.child:{job.id}:call_many:tests.jobs.child_square:{i}" for i in range(3)}


def test_children_recorded_but_never_enqueued_are_enqueued_under_the_recorded_ids(harness, clock):
    """SPEC CHILD-02: a replay enqueues the recorded children whose rows are missing, under the
    recorded ids, and inserting an id that exists is a no-op."""
    # a worker killed between the step's write and the enqueue: the replay inserts exactly the
    # ids the record names, and a second replay adds nothing
    job, _, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="k", ns=[5, 6])
    ids = uuid7_many(2)
    harness.driver.steps().put(
        StepRecord(
            run_id=job.run_id,
            name="call_many:tests.jobs.child_square",
            status="waiting",
            output={"children": [str(i) for i in ids]},
        ),
        job_id=job.id,
        lease_token=job.lease_token,
    )
    for _ in range(2):
        _, replay, _ = steps_for(harness, job)
        with pytest.raises(StepSuspension):
            replay.call_many(jobs.child_square, [{"n": 5}, {"n": 6}])
        assert sorted(c.id for c in _children(harness)) == sorted(ids)


def test_child_05_a_parent_looks_at_its_live_children_every_event_poll_and_writes_nothing(
    harness, clock
):
    """SPEC CHILD-05: while a child is live the parent stays parked, due again every
    ``event_poll`` (``parent_calls``: 5 s); each look reads the children and parks again,
    spending no attempt and writing nothing to them."""
    parent = jobs.parent_calls.enqueue(tag="look", ns=[1, 2]).id
    # one pass runs the parent alone: it parks and enqueues its children
    [first] = (
        Worker(queues=["default"], driver=harness.driver, clock=clock).tick(limit=1).executions
    )
    assert (first.job.id, first.outcome) == (parent, Outcome.SUSPENDED)
    # another worker holds both children: live, and not ending while the parent looks
    held = harness.driver.runs().claim(
        queues=["default"], limit=10, visibility_timeout=600, worker_id="w2"
    )
    assert sorted(c.id for c in held) == sorted(c.id for c in _children(harness))
    assert run_until_idle(clock=clock) == []  # the parent is not due before its poll
    parked = harness.row(parent).attempt  # a park gives the attempt back
    for look in range(2):
        harness.advance(6)
        children = {c.id: harness.row(c.id) for c in held}
        [again] = run_until_idle(clock=clock)
        assert (again.job.id, again.outcome) == (parent, Outcome.SUSPENDED), look
        assert {i: harness.row(i) for i in children} == children  # read, never written
        row = harness.row(parent)
        assert (row.state, row.attempt) == ("suspended", parked)
        assert 4 <= (row.run_at - row.updated_at).total_seconds() <= 6  # due at the next poll
    assert len(_children(harness)) == 2


def test_a_dead_child_raises_the_typed_error_the_parent_catches(harness, clock):
    """SPEC CHILD-04: a dead child completes the step as failed; the call raises
    ``ChildJobFailedError`` naming it (index, id, state, stop reason, last error)."""
    parent = jobs.parent_calls.enqueue(tag="d", ns=[1, 2, 3], fail=[2]).id
    run_to_completion(parent, clock=clock)
    result = harness.row(parent).result
    [failed] = result["children"]
    assert result["caught"] == "X_CHILD_FAILED" and failed["index"] == 1
    assert result["child_id"] == failed["id"]
    row = harness.row(uuid.UUID(failed["id"]))
    assert failed["state"] == row.state and row.state in ("dead", "failed")
    assert failed["stop_reason"] == row.stop_reason == "terminal"
    assert "child 2 refused" in failed["last_error"]
    assert Ledger.objects.filter(token="d", phase="resumed").count() == 0


def test_an_uncaught_child_failure_ends_the_parent_at_once_and_replays_the_same(harness, clock):
    """SPEC CHILD-04: ``X_CHILD_FAILED`` is terminal, so the parent is not retried into the same
    dead child."""
    parent = jobs.parent_call.enqueue(n=4, fail=True).id
    run_to_completion(parent, clock=clock)
    row = harness.row(parent)
    assert row.state in ("dead", "failed") and row.last_error.startswith("X_CHILD_FAILED")
    assert row.attempt == 1  # terminal: a retry would replay the same dead child
    assert len(_children(harness)) == 1
    assert CODES["X_CHILD_FAILED"] is ChildJobFailedError


def test_call_returns_one_result_and_repeated_calls_get_ordinal_names(harness, clock):
    """SPEC CHILD-03: ``call`` returns the one result."""
    parent = jobs.parent_call.enqueue(n=2).id
    run_to_completion(parent, clock=clock)
    assert harness.row(parent).result == {"one": {"square": 4}, "two": {"square": 9}}
    names = set(steps_of(harness, parent))
    assert names == {"call:tests.jobs.child_square", "call:tests.jobs.child_square#2"}


def test_call_many_of_no_inputs_returns_at_once(harness, clock):
    """SPEC CHILD-03: ``call_many`` of no inputs returns ``[]`` at once, enqueuing nothing."""
    parent = jobs.parent_calls.enqueue(tag="z", ns=[]).id
    [run] = run_until_idle(clock=clock)
    assert run.outcome == Outcome.COMPLETED
    assert harness.row(parent).result == {"results": []} and _children(harness) == []


def test_call_many_of_one_input(harness, clock):
    parent = jobs.parent_calls.enqueue(tag="o", ns=[7]).id
    run_to_completion(parent, clock=clock)
    assert harness.row(parent).result == {"results": [{"square": 49}]}
    assert len(_children(harness)) == 1


def test_an_async_parent_calls_children_too(harness, clock):
    parent = jobs.async_parent_call.enqueue(n=3).id
    run_to_completion(parent, clock=clock)
    assert harness.row(parent).result == {"many": [{"square": 9}, {"square": 16}]}


def test_bad_calls_are_refused_before_any_child_is_enqueued(harness, clock):
    """SPEC CHILD-01: every input is checked before a record is written or a child enqueued."""
    _, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="b", ns=[1])
    with pytest.raises(InvariantError, match="is not a job"):
        steps.call(print, {})
    with pytest.raises(InvariantError, match="list of input dicts"):
        steps.call_many(jobs.child_square, {"n": 1})
    with pytest.raises(InvariantError, match="inputs\\[1\\]"):
        steps.call_many(jobs.child_square, [{"n": 1}, 2])
    assert _children(harness) == []


def test_a_live_child_holding_the_key_is_adopted_not_waited_for_forever(harness, clock):
    # a parent retried from its call step while the first pass's child still runs: the new
    # pass's enqueue dedupes to that child, and the step records and waits for it
    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="a", ns=[8])
    name = "call_many:tests.jobs.child_square"
    live = harness.driver.jobs().enqueue(
        replace(
            jobs.child_square.build_request({"n": 8}),
            idempotency_key=f"xjobs.child:{job.id}:{name}:0",
        )
    )
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, [{"n": 8}])
    assert [c.id for c in _children(harness)] == [live.id]
    assert steps_of(harness, job.id)[name].output == {
        "kind": "call_many",
        "job": "tests.jobs.child_square",
        "children": [str(live.id)],
    }


def test_child_06_cancelling_a_parent_cancels_its_live_children_only(harness, clock):
    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="c", ns=[1, 2, 3])
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, [{"n": n} for n in (1, 2, 3)])
    [claimed] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w2"
    )
    harness.driver.runs().complete([Complete(claimed.id, claimed.lease_token, "{}")])
    assert cancel_job(job.id, reason="stop")["state"] == "cancelled"
    states = {c.id: c.state for c in _children(harness)}
    assert states[claimed.id] == "done"
    assert sorted(s for i, s in states.items() if i != claimed.id) == ["cancelled", "cancelled"]
    assert all(
        harness.row(i).last_error.endswith(f"parent {job.id} was cancelled")
        for i, s in states.items()
        if s == "cancelled"
    )


def test_bulk_05_cancel_jobs_cancels_a_parked_parents_live_children_too(harness, clock):
    """SPEC BULK-05: a cancel by filter does to a parked parent what cancel_job does."""
    from django_xjobs import cancel_jobs

    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="b", ns=[1, 2])
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, [{"n": n} for n in (1, 2)])
    answer = cancel_jobs(name="tests.jobs.parent_calls", reason="stop")
    assert (answer.matched, answer.changed) == (1, 1)
    assert harness.row(job.id).state == "cancelled"
    assert [c.state for c in _children(harness)] == ["cancelled", "cancelled"]


def test_cancel_07_a_cancel_by_event_cancels_a_parked_parents_live_children_too(harness, clock):
    """SPEC CANCEL-07: an event's ``cancel_on`` does to a parked parent what cancel_job does:
    its live children are cancelled, a child that ended keeps its state, and the event counts
    only the runs its declaration named."""
    job, steps, _ = claimed_steps(harness, clock, jobs.refundable_parent, order_id=8, ns=[1, 2, 3])
    with pytest.raises(StepSuspension) as parked:
        steps.call_many(jobs.child_square, [{"n": n} for n in (1, 2, 3)])
    park = SuspendUntil(job.id, job.lease_token, delay=60, children=parked.value.children)
    assert harness.driver.runs().suspend(park)
    [claimed] = harness.driver.runs().claim(
        queues=["default"], limit=1, visibility_timeout=30, worker_id="w2"
    )
    harness.driver.runs().complete([Complete(claimed.id, claimed.lease_token, "{}")])
    other = jobs.child_square.enqueue(n=99).id  # no step called it: left alone
    record = publish_event("order.refunded", {"order_id": 8})
    assert record.cancelled == 1 and harness.row(job.id).state == "cancelled"  # was suspended
    states = {c.id: c.state for c in _children(harness) if c.id != other}
    assert states.pop(claimed.id) == "done"
    assert sorted(states.values()) == ["cancelled", "cancelled"]
    assert all(harness.row(i).last_error == f"parent {job.id} was cancelled" for i in states)
    assert harness.row(other).state == "ready"


# --- CHILD-08: the record is authoritative on a replay ----------------------------------------

CALLED = "call_many:tests.jobs.child_square"


def _parked_on_three(harness, clock, tag):
    job, steps, _ = claimed_steps(harness, clock, jobs.parent_calls, tag=tag, ns=[1, 2, 3])
    with pytest.raises(StepSuspension):
        steps.call_many(jobs.child_square, [{"n": n} for n in (1, 2, 3)])
    return job, steps_of(harness, job.id)[CALLED], {c.id for c in _children(harness)}


def _refused(harness, job, call, *words):
    _, replay, _ = steps_for(harness, job)
    with pytest.raises(StepReplayMismatchError) as refused:
        call(replay)
    assert refused.value.code == "X_STEP_REPLAY_MISMATCH" and refused.value.hint
    assert all(word in refused.value.message for word in words), refused.value.message
    return refused.value


def test_child_08_a_replay_with_another_number_of_inputs_is_refused(harness, clock):
    job, record, first = _parked_on_three(harness, clock, "n")
    for ns in ([1, 2], [1, 2, 3, 4]):
        inputs = [{"n": n} for n in ns]
        _refused(
            harness,
            job,
            lambda replay, inputs=inputs: replay.call_many(jobs.child_square, inputs),
            f"3 input(s) were recorded, {len(ns)} are given now",
        )
    # nothing enqueued, nothing rewritten: the record and its three children stand
    assert {c.id for c in _children(harness)} == first
    assert steps_of(harness, job.id)[CALLED] == record
    assert CODES["X_STEP_REPLAY_MISMATCH"] is StepReplayMismatchError
    assert StepReplayMismatchError.retry == "terminal"  # every replay reads the same record


def test_child_08_a_replay_calling_another_job_or_kind_is_refused(harness, clock):
    job, record, first = _parked_on_three(harness, clock, "j")
    other = [{"token": "j", "i": i} for i in range(3)]
    _refused(
        harness,
        job,
        lambda replay: replay.call_many(jobs.chaos_child, other, name=CALLED),
        "'tests.jobs.child_square' was recorded, 'tests.jobs.chaos_child' is called now",
    )
    _refused(
        harness,
        job,
        lambda replay: replay.call(jobs.child_square, {"n": 1}, name=CALLED),
        "'call_many' was recorded, 'call' is called now",
    )
    assert {c.id for c in _children(harness)} == first
    assert steps_of(harness, job.id)[CALLED] == record


def test_child_08_a_completed_record_refuses_another_count_and_a_plain_step_its_name(
    harness, clock
):
    """A completed record also answers with its stored results, with no child row to read
    (SPEC CHILD-03)."""
    # a record written before calls named their job and kind: its count still holds
    job, _, _ = claimed_steps(harness, clock, jobs.parent_calls, tag="c8", ns=[5])
    [child] = uuid7_many(1)
    harness.driver.steps().put(
        StepRecord(
            run_id=job.run_id,
            name=CALLED,
            status="completed",
            output={"children": [str(child)], "results": [{"square": 25}]},
        ),
        job_id=job.id,
        lease_token=job.lease_token,
    )
    _, replay, _ = steps_for(harness, job)
    assert replay.call_many(jobs.child_square, [{"n": 5}]) == [{"square": 25}]
    _refused(
        harness,
        job,
        lambda replay: replay.call_many(jobs.child_square, [{"n": 5}, {"n": 6}]),
        "1 input(s) were recorded, 2 are given now",
    )
    harness.driver.steps().put(
        StepRecord(run_id=job.run_id, name="fetch", status="completed", output=7),
        job_id=job.id,
        lease_token=job.lease_token,
    )
    _refused(
        harness,
        job,
        lambda replay: replay.call(jobs.child_square, {"n": 1}, name="fetch"),
        "not a child call",
    )
    assert _children(harness) == []


# --- lineage (issue 40) -------------------------------------------------------------------------


def test_child_09_a_job_calling_itself_as_a_child_ends_at_max_child_depth(harness, clock):
    """SPEC CHILD-09: a handler that calls its own job as a child adds one generation a run;
    the job ``MAX_CHILD_DEPTH`` generations deep is refused with ``X_CHILD_DEPTH`` (terminal)
    before its step writes a record or enqueues a child, and each parent's call then fails as
    any failed child does."""
    root = jobs.nested_call.enqueue(tag="deep", level=0).id
    run_until_idle(clock=clock)
    rows = {
        row.input["level"]: row
        for row in harness.driver.reads().list_jobs(name=jobs.nested_call.name)
    }
    assert sorted(rows) == list(range(MAX_CHILD_DEPTH + 1))  # the root and 16 generations
    deepest = rows[MAX_CHILD_DEPTH]
    assert (deepest.state, deepest.attempt) == ("dead", 1)
    line = deepest.last_error
    assert line.startswith("X_CHILD_DEPTH: step 'call:tests.jobs.nested_call'")
    assert f"{MAX_CHILD_DEPTH} generations deep" in line and f"({MAX_CHILD_DEPTH})" in line
    assert "\n" not in line and "ctx.step.call" in line  # one line, with its hint
    assert steps_of(harness, deepest.id) == {}  # nothing recorded for the refused call
    parents = [rows[level] for level in range(MAX_CHILD_DEPTH)]
    assert {(r.state, r.last_error.split(":")[0]) for r in parents} == {("dead", "X_CHILD_FAILED")}
    assert rows[0].id == root
    ran = Ledger.objects.filter(token__startswith="deep-", phase="ran")
    assert sorted({r.token for r in ran}) == sorted(f"deep-{n}" for n in range(MAX_CHILD_DEPTH + 1))


def _descend(harness, clock, levels):
    """Run ``nested_call`` by hand ``levels`` generations down: each claimed run calls its child
    and parks (it stays running, held by its lease, so the next claim takes the child); the run
    of the last generation is returned claimed, unrun."""
    jobs.nested_call.enqueue(tag="hand", level=0)
    for _ in range(levels + 1):
        [job] = harness.driver.runs().claim(
            queues=["default"], limit=1, visibility_timeout=30, worker_id="w"
        )
        if job.input["level"] == levels:
            return job
        _, steps, _ = steps_for(harness, job)
        with pytest.raises(StepSuspension):
            steps.call(jobs.nested_call, {"tag": "hand", "level": job.input["level"] + 1})
    raise AssertionError("unreachable")


def _reads(harness, monkeypatch):
    """The ids the driver's ``get_job`` is asked for from now on (the calls go through)."""
    asked = []
    real = harness.driver.reads().get_job

    def get_job(job_id):
        asked.append(job_id)
        return real(job_id)

    monkeypatch.setattr(harness.driver, "get_job", get_job)
    return asked


def test_child_09_the_depth_is_read_up_the_parents_keys_once_never_on_a_replay(
    harness, clock, monkeypatch
):
    """SPEC CHILD-09: a child's key names its parent, so the depth costs one point read a
    generation (none for a job no step called) at the step's first pass only: a replay of a
    recorded call reads no ancestor and is never refused, even past a bound lowered since."""
    job = _descend(harness, clock, 3)
    ids = {
        r.input["level"]: r.id for r in harness.driver.reads().list_jobs(name=jobs.nested_call.name)
    }
    asked = _reads(harness, monkeypatch)
    _, steps, _ = steps_for(harness, job)
    with pytest.raises(StepSuspension):
        steps.call(jobs.nested_call, {"tag": "hand", "level": 4})
    assert asked == [ids[2], ids[1], ids[0]]  # its parent, theirs, the root: then it stops
    monkeypatch.setattr(children_module, "MAX_CHILD_DEPTH", 2)
    asked.clear()
    _, replay, _ = steps_for(harness, job)
    with pytest.raises(StepSuspension):  # the recorded call resumes: its child exists
        replay.call(jobs.nested_call, {"tag": "hand", "level": 4})
    assert ids[2] not in asked and ids[1] not in asked and ids[0] not in asked
    with pytest.raises(ChildDepthError) as refused:  # a new call in the same run is asked
        replay.call(jobs.child_square, {"n": 1})
    assert refused.value.code == "X_CHILD_DEPTH" and refused.value.meta["limit"] == 2
    assert asked[-1:] == [ids[2]]  # at the bound after bound - 1 reads
    assert "call:tests.jobs.child_square" not in steps_of(harness, job.id)
    assert harness.driver.reads().list_jobs(name=jobs.child_square.name) == []


def test_child_09_a_root_reads_nothing_and_an_empty_call_many_is_never_refused(
    harness, clock, monkeypatch
):
    """SPEC CHILD-09: the children of a job no step called cost no read; a ``call_many`` of no
    inputs asks for no child, so it returns ``[]`` at the bound too."""
    monkeypatch.setattr(children_module, "MAX_CHILD_DEPTH", 1)
    asked = _reads(harness, monkeypatch)
    job = _descend(harness, clock, 1)  # the root called its child: no read
    assert asked == []
    _, steps, _ = steps_for(harness, job)
    assert steps.call_many(jobs.child_square, []) == []
    with pytest.raises(
        ChildDepthError,
        match=r"1 generation deep; its children would be 2, past MAX_CHILD_DEPTH \(1\)",
    ):
        steps.call(jobs.nested_call, {"tag": "hand", "level": 2})
    assert asked == []  # at a bound of 1 the key alone says it
