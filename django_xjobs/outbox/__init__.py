"""The transactional outbox's relay role: rows an enqueue staged inside ``atomic()`` (staged by
``run/enqueue.py``, published by ``run/publish.py``) moved to the job store once committed."""
