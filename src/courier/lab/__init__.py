"""The lab: measurement records, workloads and the experiment runner."""
