"""``flaketally serve``: the receiver under uvicorn, one process; run more of them to scale out."""

from __future__ import annotations

import logging

import uvicorn

from bot.settings import Settings
from bot.web.app import create_app

_FIELDS = ("delivery_id", "event", "action", "outcome", "status", "component", "metric", "error")


class FieldsFormatter(logging.Formatter):
    """The fixed message followed by its structured fields as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = " ".join(f"{k}={getattr(record, k)!r}" for k in _FIELDS if hasattr(record, k))
        return f"{text} {fields}" if fields else text


def configure_logging(level: int = logging.INFO) -> None:
    """Our loggers to stderr, unless the host process configured logging already."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


def serve(settings: Settings, host: str, port: int) -> None:
    """Run the receiver until interrupted. The access log is off: the receiver logs every delivery itself."""
    configure_logging()
    app = create_app(settings)
    uvicorn.run(app, host=host, port=port, access_log=False, log_config=None)
