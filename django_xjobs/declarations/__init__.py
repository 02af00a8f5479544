"""What application code declares and enqueues: jobs (``job``), crons (``cron``), batches
(``workflows``), and the registry that finds each by its durable name (``registry``)."""
