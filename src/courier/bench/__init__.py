"""Benchmarks anyone can run: `courier bench peers`, `standard`, `churn`, `flat`, `pops`, ...

- ``peers``: the systems (Courier through its middleware, Courier's database tier
  directly) and ``rabbit`` (RabbitMQ), each driven by ``loop``'s closed loop in
  client processes (started by ``launch``), over the levels that ``sweep`` runs;
- ``standard``: the lab's standard cycle, summed up from its records;
- ``churn``: the closed loop through Courier for minutes, cut into ``intervals``,
  with the messages table sampled as each ends;
- ``flat``: one pop beside millions of messages for others; ``pops``: the database
  tier emptying a full queue at several numbers of connections;
- ``chaos``: at-least-once delivery while ``chaos_cluster`` kills middleware and
  restarts PostgreSQL, driven by ``chaos_clients`` (producers and consumers in
  client processes) and checked by ``chaos_ledger`` (lost, duplicate acks, failovers);
- ``database`` (the run's database, bulk loads, table samples), ``results``
  (percentiles, ratios, JSON), ``progress`` and ``output`` (tables, progress, plots).
"""
