"""A live view of the enriched topics: the README's "stateless downstream" consumer.

It reads the hydrator's output (`read_committed`) and pushes every row change to the browsers
that have its page open, over a websocket: one table row per key, with the columns the
hydrator filled marked. Run it with `python -m hydrator.live --bootstrap-servers ... --topic
...` (the `live` extra installs its websocket library); the compose stack in docker/ runs it.
"""
