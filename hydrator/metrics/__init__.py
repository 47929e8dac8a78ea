"""What a run reports to operators: `--metrics-port` serves Prometheus metrics, `/healthz` and
`/readyz` (docs/operations.md lists them).

run.py       RunMetrics: what an engine publishes (counts, gauges, commit latency), engine-neutral;
             Verdict and the Health protocol each engine implements for /healthz and /readyz
exporter.py  the Prometheus collector over RunMetrics, and the HTTP server
jumps.py     when a rise in unresolved events or dead letters is worth a warning (both
             engines' progress lines)
count_line.py        the counts of a progress or totals line as words, both engines
dead_letter_ratio.py when an `--available-now` run sent too much to the DLQ (exit 65)

The engines fill RunMetrics from their own thread and never block on it; the HTTP server's
threads read only values the engine replaces whole. The counter names are the core's list,
hydrator/core/counters.py.
"""
