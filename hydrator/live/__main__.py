"""`python -m hydrator.live`: serve the live view of the enriched topics."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable

import click

from hydrator.cli.params import (
    PORT,
    SHOW_DEFAULTS,
    bootstrap_servers_option,
    format_option,
    from_beginning_option,
)
from hydrator.formats import codec_for
from hydrator.live.access import access
from hydrator.live.feed import run_feed
from hydrator.live.rows import RowChange
from hydrator.live.server import serve_live

log = logging.getLogger("hydrator.live")


@click.command(context_settings=SHOW_DEFAULTS)
@bootstrap_servers_option(show_envvar=True)
@click.option(
    "--topic",
    "topics",
    multiple=True,
    required=True,
    envvar="HYDRATOR_LIVE_TOPIC",
    show_envvar=True,
    help="Enriched topic to show; repeat (or separate by spaces) for several.",
)
@click.option("--host", default="127.0.0.1", envvar="HYDRATOR_LIVE_HOST")
@click.option(
    "--port",
    type=PORT,
    default=8080,
    envvar="HYDRATOR_LIVE_PORT",
    help="0 picks a free port (logged).",
)
@format_option()
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=500,
    help="Keys kept for pages that connect later (the most recently changed).",
)
@click.option(
    "--preview-chars",
    type=click.IntRange(min=8),
    default=160,
    help="Longer values are shown abbreviated, with their length.",
)
@click.option(
    "--allow-origin",
    "allowed_origins",
    multiple=True,
    envvar="HYDRATOR_LIVE_ALLOW_ORIGIN",
    show_envvar=True,
    help="A web origin (scheme://host[:port]) whose pages may open the view's websocket; "
    "repeat for several. Default: only the view's own, addressed by a loopback name or an IP.",
)
@click.option(
    "--token",
    envvar="HYDRATOR_LIVE_TOKEN",
    show_envvar=True,
    help="Ask every client for ?token=<this> (open the page as /?token=...). "
    "Give it through the environment, not the command line.",
)
@from_beginning_option("Start from the topics' first records, or only show new ones.")
def main(
    bootstrap_servers: str,
    topics: tuple[str, ...],
    host: str,
    port: int,
    format_: str,
    max_rows: int,
    preview_chars: int,
    allowed_origins: tuple[str, ...],
    token: str | None,
    from_beginning: bool,
) -> None:
    """Serve a page that shows the enriched topics' rows as they change."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("websockets").setLevel(logging.WARNING)
    codec = codec_for(format_)
    stop = threading.Event()
    failure: list[BaseException] = []

    def start_feed(deliver: Callable[[RowChange], None]) -> threading.Thread:
        def feed() -> None:
            try:
                run_feed(
                    bootstrap_servers,
                    topics,
                    codec,
                    preview_chars,
                    deliver,
                    stop,
                    from_beginning,
                )
            except BaseException as exc:
                failure.append(exc)
                log.exception("the Kafka feed failed")

        thread = threading.Thread(target=feed, name="live-feed", daemon=True)
        thread.start()
        return thread

    asyncio.run(serve_live(host, port, max_rows, start_feed, stop, access(allowed_origins, token)))
    if failure:
        sys.exit(1)


if __name__ == "__main__":
    main()
