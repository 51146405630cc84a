"""How kubectl writes times: ages as ``k8s.io/apimachinery/pkg/util/duration.HumanDuration``
(``5s``, ``3m2s``, ``2d3h``), dates as Go's ``time.RFC1123Z``."""

from __future__ import annotations

import datetime as dt


def human_duration(seconds: float) -> str:
    """HumanDuration: two units at most, coarser as the age grows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def rfc1123z(unix: float) -> str:
    """``Thu, 03 Dec 2026 17:48:32 +0000`` (kubectl describe's timestamps, in UTC)."""
    return dt.datetime.fromtimestamp(unix, dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")
