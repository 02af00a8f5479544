"""Vacuum settings that keep a claim cheap on a table of millions of finished jobs.

Measured with ``python -m bench.run --workloads SOAK`` (bench/README.md), which enqueues and
drains jobs in waves on one table, with retention on, and reports the buffers one claim reads.

Why vacuum is what matters: a job is written three times (inserted ready, claimed, settled), and
every write leaves the previous row version dead until a vacuum. The claim walks the claim index
from its head, the oldest waiting rows, and each job claimed since the last vacuum left its dead
entry right there. The first claim that meets an entry marks it dead, so later claims do not
visit the table for it, but they still read its index page: only VACUUM removes it. In the soak,
a claim read about 7 more buffers per 1,000 jobs run since the last vacuum (2,145 buffers for an
idle poll after 300,000 jobs), and as few as on an empty table right after one.

- ``autovacuum_vacuum_scale_factor = 0``, ``autovacuum_vacuum_threshold = 2000``: 0006 vacuumed
  after 2 % of the table changed. On a table of 10 million rows, mostly finished, that is
  200,000 dead rows, about 70,000 jobs (each leaves two or three dead versions: claim, settle,
  prune), whose dead entries every claim would step over. A fixed 2,000 vacuums x_jobs at each
  autovacuum visit while jobs run, and within minutes when the queue is quiet.
- ``vacuum_index_cleanup = on``: by default VACUUM leaves the indexes alone when fewer than 2 %
  of the table's pages hold dead rows ("index scan bypassed"). That is always so on a large,
  mostly finished table: the table is cleaned, the claim index's dead entries stay. Measured on
  2 million finished rows after 3,000 jobs ran: an idle claim read 38 buffers, 23 after a
  default VACUUM and 1 after one with index cleanup on. The price: every vacuum reads each
  index whole, the primary key and the age index included (about 0.3 GB each at 10 million
  rows).
- ``autovacuum_vacuum_cost_delay = 0``: throttled (2 ms sleeps), a vacuum that reads those
  indexes is still running when the next jobs' dead entries pile up behind it. The table's
  vacuum runs unthrottled: its work is what every claim's cost depends on.
- No fillfactor: it only pays for HOT updates, and no write of a job row can be one. A HOT update
  needs every indexed column unchanged, index predicates included; each claim, settle and retry
  changes ``state``, which is in the predicate of every partial index (claim, lease, live key,
  age), and a heartbeat changes ``visible_at``, the lease index's key. The soak counts 0 % HOT
  updates. A fillfactor of 80 gave the same heap (146 against 147 MB) and the same claim buffers
  (1,481 against 1,469) over 200,000 jobs: it would only leave a fifth of every page empty,
  mostly pages of finished rows.
- No new index: the claim, lease and live-key indexes already hold live rows only (0006), the age
  index finished rows only (0007). The primary key is the only index over every row; a claim
  looks its rows up by id, one level deeper at 10 million rows than at 10,000
  (tests/test_claim_buffers.py).
- Retention deletes in the age index's order, a batch of 1,000 rows per short transaction
  (``prune`` in drivers/postgres.sql): it never holds a lock for long.

What a table setting cannot change: autovacuum visits a database once per
``autovacuum_naptime`` (a server setting, 1 minute by default), so between two visits a claim
steps over every job claimed meanwhile: at 5,000 jobs a second, 300,000 dead entries, about
2,000 buffers. A busy queue wants a shorter naptime, e.g. 10 s: over the soak's million jobs,
claims then stayed under 720 buffers and the table at 196 MB of heap and 81 MB of indexes, where
the default minute let claims reach 2,859 buffers and the table 393 + 165 MB.

Together, on 10 million finished rows and 300,000 jobs run in three waves (naptime 10 s), the
claims of the last wave read 234 buffers on a full queue and 156 on a drained one; with 0006's
settings 903 and 1,369.
"""

from django.db import migrations

UPKEEP = """
ALTER TABLE x_jobs SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    vacuum_index_cleanup = on
)
"""
UPKEEP_RESET = """
ALTER TABLE x_jobs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 500);
ALTER TABLE x_jobs RESET (autovacuum_vacuum_cost_delay, vacuum_index_cleanup)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("django_xjobs", "0009_backfill_ledger"),
    ]

    operations = [
        migrations.RunSQL(UPKEEP, reverse_sql=UPKEEP_RESET),
    ]
