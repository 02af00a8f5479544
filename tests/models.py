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
