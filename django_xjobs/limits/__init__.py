"""Fleet-wide limits at run time: a partner's ``RateLimited`` (``rate_limited``), and a queue's
runtime cap with what each limit key uses now (``caps``). What a job declares is parsed in
``limit_keys``, in the base, since the drivers render a run's key where they write its row."""
