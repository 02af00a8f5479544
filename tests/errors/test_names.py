"""Every error is named by the path users import it from, ``django_xjobs.errors.<Name>``,
whichever module of the package defines it (issue 41): its pickles, the class path a failed
attempt stores and the reference all read that name."""

from __future__ import annotations

import pickle

from django_xjobs import errors, history
from django_xjobs.errors import CODES, JobTimeoutError, XJobsError


def test_every_error_class_is_named_by_the_package_path():
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors._Coded)
    ]
    assert len(classes) > len(CODES)  # the codes' classes, the roots and the internal ones
    assert sorted(c.__name__ for c in classes if c.__module__ != "django_xjobs.errors") == []
    assert all(getattr(errors, c.__qualname__) is c for c in classes)


def test_an_error_pickles_by_the_package_path_and_a_failure_stores_it():
    error = JobTimeoutError("step 'fetch' passed its step_timeout of 5s", hint="split it")
    assert b"django_xjobs.errors\nJobTimeoutError\n" in pickle.dumps(error, protocol=0)
    loaded = pickle.loads(pickle.dumps(error))
    assert type(loaded) is JobTimeoutError and str(loaded) == str(error)
    assert history.failure(error, "retried").exception == "django_xjobs.errors.JobTimeoutError"
    assert history.failure(XJobsError("x"), "dead").exception == "django_xjobs.errors.XJobsError"
