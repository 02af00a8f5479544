"""A producer for the chaos suite: batches of five enqueues, each batch in one transaction
(staged in the outbox), the transaction held open 1 s so a SIGKILL lands inside it.

    DJANGO_SETTINGS_MODULE=chaos.settings python -m chaos.producer <token-prefix>
"""

from __future__ import annotations

import sys
import time

import django


def main(prefix: str) -> None:
    django.setup()
    from django.db import transaction

    from chaos.jobs import stream

    batch = 0
    while True:
        with transaction.atomic():
            for i in range(5):
                stream.enqueue(token=f"{prefix}{batch}-{i}", hold=0.2)
            print(f"open {batch}", flush=True)
            time.sleep(1.0)  # the window a SIGKILL is aimed at: staged, not committed
        print(f"committed {batch}", flush=True)
        batch += 1
        time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1])
