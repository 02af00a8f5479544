from django.db import models


class Ledger(models.Model):
    """What job fixtures did, written by the jobs themselves: the proof of exactly-once."""

    token = models.TextField()
    phase = models.TextField()
    attempt = models.IntegerField()
    pid = models.IntegerField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.token} {self.phase} #{self.attempt}"


class Order(models.Model):
    """Rows the backfill tests sweep: a column added later, filled by a backfill."""

    currency = models.TextField(null=True)
    #: how many times a backfill handler was given this row (the proof of once-per-page)
    handled = models.IntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"order {self.pk} {self.currency or '-'}"


class Token(models.Model):
    """A table with a non-integer primary key, for the keyset cursor stored as text."""

    id = models.UUIDField(primary_key=True)
    done = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"token {self.pk}"


class Effect(models.Model):
    """A row written inside ``ctx.step.atomic``: one per (job, step) is the proof that an
    atomic step's database effects happen exactly once. No unique constraint on purpose: a
    duplicate must show up in a count, not be refused and retried."""

    job_id = models.UUIDField()
    step = models.TextField()
    attempt = models.IntegerField()
    pid = models.IntegerField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.job_id} {self.step} #{self.attempt}"
