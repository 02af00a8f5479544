"""Five jobs: one that succeeds, one retried, one terminal, one of durable steps, and one
staged by a view in the same transaction as its order (the outbox)."""

from django_xjobs import Retry, TerminalError, cron, job

QUICK = Retry(attempts=3, delay="300ms", max_delay="1s")


@job(idempotency_key="welcome:{user_id}", queue="emails")
def send_welcome_email(ctx, user_id: int):
    """Succeeds on the first attempt."""
    ctx.logger.info("sending the welcome email to user %s", user_id)
    return {"sent_to": user_id}


@job(idempotency_key="sync:{account_id}", retry=QUICK)
def sync_account(ctx, account_id: int, flaky_attempts: int = 2):
    """Fails while the partner API is 'down', then succeeds on a retry."""
    if ctx.attempt <= flaky_attempts:
        raise ConnectionError(f"partner API timed out (attempt {ctx.attempt})")
    return {"synced": account_id, "after_attempts": ctx.attempt}


@job(idempotency_key="charge:{order_id}", retry=Retry(attempts=5, delay="300ms"))
def charge_card(ctx, order_id: int):
    """A declined card cannot succeed: it stops at once, with four attempts unspent."""
    raise TerminalError(f"card for order {order_id} was declined")


@job(idempotency_key="onboard:{customer_id}", event_poll="500ms", timeout="1m")
def onboard_customer(ctx, customer_id: int):
    """Durable steps: each result is stored; a retry or a crash resumes after the last one.

    The sleep and the wait park the job in the database: no worker thread is held meanwhile.
    """
    account = ctx.step.run("create-account", lambda: {"account": f"acct-{customer_id}"})
    ctx.step.sleep("cooling-off", "1s")
    confirmation = ctx.step.wait_for_event(
        "email-confirmed", "customer.confirmed", match={"customer_id": customer_id}, timeout="30s"
    )
    pack = ctx.step.run("send-welcome-pack", lambda: {"sent": True, "to": account["account"]})
    return {"account": account["account"], "confirmed": confirmation is not None, **pack}


@job(idempotency_key="confirm-order:{order_id}", queue="emails")
def send_order_confirmation(ctx, order_id: int):
    """Enqueued by the place_order view inside its transaction (the outbox)."""
    from .models import Order

    order = Order.objects.get(pk=order_id)
    return {"confirmed": order.pk, "to": order.email}


@job(idempotency_key="digest:{day}", queue="emails")
def send_daily_digest(ctx, day: str):
    """Enqueued once per day by the nightly_digest cron, for that day."""
    return {"digest_for": day}


@cron("0 7 * * *", tz="Europe/Paris", catch_up="run-once")
def nightly_digest(occurrence):
    """07:00 Paris time, every day. After downtime, one catch-up run, never a burst.

    The payload comes from the occurrence, not the clock: a late run digests its own day.
    """
    return [(send_daily_digest, {"day": occurrence.date().isoformat()})]
