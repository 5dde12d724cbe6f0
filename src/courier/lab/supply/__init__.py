"""The supply-chain benchmark: supermarkets, distribution centres, headquarters and
suppliers exchanging 19 message kinds through Courier queues and topics, in seven
interactions, scaled by one parameter, BASE. Modelled on SPECjms2007's workload.

    kinds        the message kinds and interactions: destination, persistence, transactions
    topology     the spec (TOML) and the scaling rules: locations and rates at a BASE
    destinations queue and topic names per location, created before the load
    delivery     the one path every benchmark send and publish takes (delivery mode)
    agents       event handlers and drivers of each location
    process      a load process running a share of the locations
    bench        one benchmark run (records, manifest, destination map)
    search       the largest valid BASE: grow, then bisect

docs/lab.md ("The supply-chain benchmark") describes the rules.
"""
