"""One API server's HTTP, under :class:`~gpu_lab.kube.client.KubeClient`: the official
package's ``ApiClient`` and its urllib3 connection pool (kept open for the client's life),
exec credential plugins' tokens and certificates (run again once on a 401, client-go's rule),
kube-apiserver's request-size limit checked before sending, and transport failures as one
:class:`Unreachable` line."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client import rest

from ..names import MAX_REQUEST_BYTES
from . import kubeconfig as kc
from .errors import ApiError, Unreachable, api_error

USER_AGENT = "gpu-lab"


class Transport:
    """HTTP to one API server (one ``ApiClient``, one pool)."""

    def __init__(self, creds: kc.Credentials, timeout: float):
        self.creds, self.server, self.timeout = creds, creds.server, timeout
        self.configuration = creds.configuration()
        self.api = k8s.ApiClient(self.configuration)
        self.api.user_agent = USER_AGENT
        self._cert = (creds.cert_file, creds.key_file)

    def close(self) -> None:
        self.api.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | tuple[float, float | None] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        """One HTTP request; raises :class:`ApiError` on an HTTP error status. The answer is
        urllib3's response (``.json()``, ``.data``); read whole unless ``stream``. With an
        exec credential plugin, its (cached) token or certificate goes with the request."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
            if isinstance(body, (str, bytes)) and "json" in content_type:
                body = json.loads(body)  # the package serialises JSON bodies itself
            # kube-apiserver's --max-request-body-bytes (3 MiB) refuses a larger body with 413
            # before reading it: one line at once here, not a broken TLS stream
            size = len(body if isinstance(body, (str, bytes)) else json.dumps(body))
            if size > MAX_REQUEST_BYTES:
                raise ApiError(413, "RequestEntityTooLarge",
                               f"Request entity too large: limit is {MAX_REQUEST_BYTES}")
        query = [(k, v) for k, v in (params or {}).items() if v is not None]
        if timeout is None:
            timeout = (self.timeout, self.timeout)
        elif not isinstance(timeout, tuple):
            timeout = (timeout, timeout)
        plugin = self.creds.exec
        cred = plugin.credential() if plugin else None
        resp = self._send(method, path, query, body, headers, timeout, cred)
        if resp.status == 401 and plugin is not None and cred is not None:
            # client-go's rule: a 401 means the plugin's credential was revoked or rotated
            # early; run the plugin again (once) and repeat the request with the new one
            self._drain(resp)
            cred = plugin.refresh(cred)
            resp = self._send(method, path, query, body, headers, timeout, cred)
        if resp.status >= 400:
            raise api_error(resp.status, resp.reason or "", self._drain(resp))
        if not stream:
            self._drain(resp)
        return resp

    def _send(self, method, path, query, body, headers, timeout, cred):
        headers = dict(headers)
        if cred is not None and cred.cert_file and (cred.cert_file, cred.key_file) != self._cert:
            self._use_cert(cred.cert_file, cred.key_file)
        method, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=query, header_params=headers, auth_settings=["BearerToken"]
        )
        if cred is not None and cred.token:
            headers["authorization"] = f"Bearer {cred.token}"
        with self._errors():
            return self.api.call_api(method, url, headers, body, _request_timeout=timeout).response

    def _use_cert(self, cert_file: str, key_file: str) -> None:
        # the connection pool holds the client certificate: a plugin's new one needs a new pool
        self.configuration.cert_file, self.configuration.key_file = cert_file, key_file
        old, self.api.rest_client = self.api.rest_client, rest.RESTClientObject(self.configuration)
        old.close()
        self._cert = (cert_file, key_file)

    def _drain(self, resp: urllib3.BaseHTTPResponse) -> bytes:
        """The whole body; the connection goes back to the pool."""
        with self._errors():
            data = resp.data or b""
        resp.release_conn()
        return data

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Transport failures as one :class:`Unreachable` line."""
        try:
            yield
        except k8s.ApiException as exc:  # the package reports a TLS failure as status 0
            first = str(exc.reason or exc).splitlines()[-1]
            raise Unreachable(f"TLS error talking to {self.server}: {first}") from exc
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise Unreachable(f"the API server at {self.server} did not answer in time") from exc
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(f"cannot connect to the API server at {self.server}") from exc
