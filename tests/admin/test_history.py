"""The history in the admin (issue 46): the moved jobs' read-only list and page, seen with
``view_jobhistory``; a moved job's old address sends to its page; "Retry selected" brings a
dead job back for a user holding ``change_job`` only, after the CSRF check. Driven through the
real admin by real users holding real permission rows."""

from __future__ import annotations

from django_xjobs.drivers import get_driver
from django_xjobs.models import Job, JobHistory
from django_xjobs.testing.factories import DeadJobFactory
from tests.support.admin import TOKEN, staff_client

HISTORY = "/admin/django_xjobs/jobhistory/"


def _moved() -> Job:
    job = DeadJobFactory(input={"email": "a@example.com"})
    get_driver().jobs().age(2 * 3600, only={"jobs"})
    assert get_driver().history().move_finished(grace=3600) == 1
    return job


def test_hist_08_the_history_list_and_page_are_read_only_and_need_their_permission(db):
    job = _moved()
    assert staff_client("nobody", "view_job").get(HISTORY).status_code == 403
    viewer = staff_client("viewer", "view_job", "view_jobhistory")
    page = viewer.get(HISTORY)
    assert page.status_code == 200 and str(job.id) in page.content.decode()
    # the job's old address sends to its page in the history
    moved = viewer.get(f"/admin/django_xjobs/job/{job.id}/change/")
    assert moved.status_code == 302
    assert moved["Location"] == f"{HISTORY}{job.id}/change/"
    shown = viewer.get(moved["Location"]).content.decode()
    assert job.name in shown
    assert "a@example.com" not in shown  # the payload's shape only, without view_job_payload
    assert 'name="_save"' not in shown  # nothing to save


def test_hist_08_retry_selected_brings_a_job_back_for_who_may_change_jobs(db):
    job = _moved()
    for name, perms in (("viewer", ()), ("operator", ("change_job",))):
        client = staff_client(name, "view_job", "view_jobhistory", *perms)
        token = TOKEN.search(client.get(HISTORY).content.decode()).group(1)
        client.post(
            HISTORY,
            {
                "action": "retry_selected",
                "_selected_action": [str(job.id)],
                "csrfmiddlewaretoken": token,
            },
        )
        back = Job.objects.filter(pk=job.id).first()
        if name == "viewer":  # the action is not offered, and a forged post does nothing
            assert back is None and JobHistory.objects.filter(pk=job.id).exists()
        else:
            assert back is not None and back.state == "ready"
            assert not JobHistory.objects.filter(pk=job.id).exists()


def test_hist_11_the_batch_page_lists_moved_members_and_a_moved_callback_as_queued(db):
    from django_xjobs import Batch
    from django_xjobs.testing import run_until_idle
    from tests import jobs

    with Batch(on_complete=jobs.batch_report) as batch:
        members = [jobs.ok.enqueue(n=i).id for i in range(2)]
    run_until_idle(queues=["default"])  # the members, then the callback
    get_driver().jobs().age(2 * 3600, only={"jobs"})
    assert get_driver().history().move_finished(grace=3600) == 3
    client = staff_client("viewer", "view_jobbatch", "view_job")
    body = client.get(f"/admin/django_xjobs/jobbatch/{batch.id}/change/").content.decode()
    assert all(f"/admin/django_xjobs/job/{m}/change/" in body for m in members)
    assert "not queued yet" not in body  # the callback ran, and lives in the history


def test_hist_14_the_job_list_counts_and_links_what_its_filter_admits_in_the_history(db):
    job = _moved()
    DeadJobFactory(queue="emails")  # still in x_jobs
    viewer = staff_client("viewer2", "view_job", "view_jobhistory", "change_job")
    body = viewer.get("/admin/django_xjobs/job/?state__exact=dead").content.decode()
    assert "Dead letters (2)" in body  # the moved one counted with the one still here
    assert "1 more job(s) this filter admits" in body
    assert f"{HISTORY}?state__exact=dead" in body
    assert "and the 1 in the job history" in body  # the "all matching" actions take it too
    listed = viewer.get(f"{HISTORY}?state__exact=dead&queue__exact={job.queue}")
    assert str(job.id) in listed.content.decode()
    # a filter the moved job does not meet says nothing of the history
    other = viewer.get("/admin/django_xjobs/job/?state__exact=dead&queue=emails")
    assert "job history</a>" not in other.content.decode()
    # nor to who may not view the history
    plain = staff_client("plain", "view_job").get("/admin/django_xjobs/job/?state__exact=dead")
    assert "more job(s) this filter admits" not in plain.content.decode()
