"""The transactional outbox: an enqueue inside ``atomic()`` commits or vanishes with it."""
