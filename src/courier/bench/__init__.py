"""Benchmarks anyone can run: `courier bench peers` and `courier bench standard`.

- ``peers``: the systems (Courier through its middleware, Courier's database tier
  directly) and ``rabbit`` (RabbitMQ), each driven by ``loop``'s closed loop in
  client processes, over the levels that ``sweep`` runs;
- ``standard``: the lab's standard cycle, summed up from its records;
- ``results`` (percentiles, ratios, JSON) and ``output`` (tables, progress, plot).
"""
