"""The `hydrator dlq replay` command for a run's configuration, as the line that ends a run with
too many dead letters prints it (hydrator/metrics/dead_letter_ratio.py): the run's Kafka
cluster, application id, state directory, topics and format, ready to paste."""

from __future__ import annotations

import shlex
from pathlib import Path

from hydrator.config import RunConfig
from hydrator.core.settings import HydrationSettings
from hydrator.formats.options import FormatOptions

# What a run tells the user when every record was dead-lettered under a format it named: the
# likeliest cause is that format, and `auto` reads each record's format from its value.
DETECTING_FORMAT = "auto"


def replay_command(config: RunConfig, state_dir: Path) -> str:
    """The command that replays the run's dead letters. A run with a named format that
    dead-lettered too much probably named the wrong one: the command says `--format auto`.
    -X values are never shown (they may be secrets): the command then says to add them."""
    args = [
        "hydrator",
        "dlq",
        "replay",
        "--bootstrap-servers",
        config.kafka.bootstrap_servers,
        "--application-id",
        config.application_id,
        "--state-dir",
        str(state_dir),
    ]
    for topic in config.input_topics:
        args += ["--input-topic", topic]
    if config.output_topic is not None:
        args += ["--output-topic", config.output_topic]
    elif config.output_suffix is not None:
        args += ["--output-suffix", config.output_suffix]
    args += ["--format", DETECTING_FORMAT]
    command = shlex.join(args)
    if _other_options(config):
        command += " (with this run's other options)"
    return command


def _other_options(config: RunConfig) -> bool:
    """Whether the run had options the command leaves out that the replay needs too: Kafka
    client properties, hydration rules, format options, re-select."""
    return bool(
        config.kafka.properties
        or config.hydration != HydrationSettings()
        or config.format_options != FormatOptions()
        or config.reselect is not None
    )
