"""What the console needs to know, resolved once by `courier console`."""

from __future__ import annotations

from dataclasses import dataclass

from courier.console import hosts

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """One console process.

    ``count_cap`` bounds every per-row count: a list counts at most that many
    messages per client or queue and reports more as ``count_cap + 1``. ``scan_limit``
    bounds how many messages one filtered page may examine.

    Without a ``viewer_token`` every page is readable by whoever reaches the
    console, so it must listen on loopback only (and answer only to the Host names
    in ``hosts``); ``allowed_hosts`` adds names to that list.

        >>> ConsoleSettings(dsn="postgresql://127.0.0.1/courier", admin_token="t").rate_window_s
        300
    """

    dsn: str
    admin_token: str
    host: str = "127.0.0.1"
    port: int = 8080
    refresh_ms: int = 2000
    rate_interval_s: float = 1.0
    rate_window_s: int = 300
    page_size: int = DEFAULT_PAGE_SIZE
    count_cap: int = 10_000
    scan_limit: int = 10_000
    pool_max_size: int = 4
    viewer_token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    session_ttl_s: float = 12 * 3600.0

    def __post_init__(self) -> None:
        if not self.viewer_token and not hosts.is_loopback(self.host):
            raise ValueError(
                f"{self.host} is not a loopback address: a console other machines can"
                " reach needs a viewer token (--viewer-token-file or COURIER_VIEWER_TOKEN)"
            )

    @property
    def checks_host(self) -> bool:
        """On loopback, or when names were allowed, only listed Host headers pass."""
        return hosts.is_loopback(self.host) or bool(self.allowed_hosts)
