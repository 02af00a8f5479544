"""``XJOBS["HISTORY"]``, ``HISTORY_GRACE`` and ``HISTORY_AHEAD`` (issue 46), checked at startup."""

from __future__ import annotations

import re

import pytest

from django_xjobs.conf import validate
from django_xjobs.errors import ConfigInvalidError


def test_hist_07_history_is_on_by_default_and_its_grace_an_hour():
    settings = validate({})
    assert (settings.history, settings.history_grace, settings.history_ahead) == (True, 3600, 3)
    on = validate({"HISTORY": True, "HISTORY_GRACE": "10m", "HISTORY_AHEAD": 7})
    assert (on.history, on.history_grace, on.history_ahead) == (True, 600, 7)
    assert validate({"HISTORY": False}).history is False  # the way out


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"HISTORY": "yes"}, 'XJOBS["HISTORY"]'),
        ({"HISTORY_GRACE": "30s"}, "at least 60s"),
        # a relay re-publishes a staged job once its claim lapses: the job must still be there
        ({"HISTORY_GRACE": "90s", "OUTBOX_CLAIM_LEASE": 60}, "twice OUTBOX_CLAIM_LEASE (120s)"),
        ({"HISTORY_AHEAD": 0}, "HISTORY_AHEAD"),
    ],
)
def test_hist_07_a_grace_too_short_or_a_wrong_value_is_refused(raw, words):
    with pytest.raises(ConfigInvalidError, match=re.escape(words)):
        validate(raw)
