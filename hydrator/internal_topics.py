"""The topics an application id owns beside its outputs: `<app-id>-state` (the embedded
engine's changelog), `-handoff` and `-dlq`. An output topic may not be one of them: Kafka would
be asked to create it twice (Tansu answers with a protocol parse failure), and the engine would
read its own outputs as handoffs."""

from __future__ import annotations

from collections.abc import Mapping

# The topics an application id owns, by what they hold.
INTERNAL_TOPICS = {
    "state": "state changelog",
    "handoff": "key-change handoffs",
    "dlq": "dead letters",
}


def internal_topic_clash(application_id: str, outputs: Mapping[str, str]) -> str | None:
    """Why an output topic (of `outputs`, input -> output) cannot be what it is; None when none
    is an internal topic."""
    internal = {f"{application_id}-{suffix}": what for suffix, what in INTERNAL_TOPICS.items()}
    for output in dict.fromkeys(outputs.values()):
        if output in internal:
            return (
                f"{output} is the {internal[output]} topic of --application-id "
                f"{application_id}; the output needs a topic of its own"
            )
    return None
