"""Connections from one broker to another: the replica fetchers' and the
transaction coordinator's (WriteTxnMarkers, AddPartitionsToTxn verify_only).

Both connect on the inter-broker listener with its TLS context and, on a SASL
listener, log in with the broker's own JAAS credentials before any other request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from broker.protocol import ProtocolError
from broker.sasl import client as sasl_client
from common.aio import within

Exchange = Callable[[int, int, dict], Awaitable[dict]]  # (api key, version, body) -> answer


async def open_to(
    brokers: Mapping, broker_id: int, listener: str, tls, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to `broker_id`'s endpoint of `listener` (LookupError when unknown)."""
    info = brokers.get(broker_id)
    address = info.endpoints.get(listener) if info is not None else None
    if address is None:
        raise LookupError(f"{listener} address of broker {broker_id} unknown")
    host, port = address
    opened = asyncio.open_connection(
        host, port, ssl=tls, server_hostname=host if tls is not None else None
    )
    return await within(opened, timeout_s)


async def sasl_login(exchange: Exchange, mechanism: str, user: str, password: str) -> None:
    """SaslHandshake v1 then SaslAuthenticate v2 over a new connection (the requests
    of `sasl_client.login`); raises ProtocolError when the other broker refuses."""
    steps = sasl_client.login(mechanism, user, password)
    try:
        request = next(steps)
        while True:
            request = steps.send(await exchange(*request))
    except StopIteration:
        return
    except (sasl_client.SaslAuthenticationError, sasl_client.SaslClientError) as e:
        raise ProtocolError(f"SASL {mechanism} as {user}: {e}") from None
