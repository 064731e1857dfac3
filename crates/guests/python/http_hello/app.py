"""http-python: a wasi:http/proxy component written in Python.

Answers every request with 200, `text/plain`, `Hello from Python: <METHOD> <path-with-query>`,
except `GET /page?html=HTML`, which answers 200, `text/html`, with HTML (percent-decoded): a page
written by a test and served at the node's own origin, as a tenant's page would be (the dashboard
test's hostile page, tests/ui/dashboard.mjs). This component is a test fixture that no example
deploys, so it may reflect what it is given.
scripts/python-component builds it with componentize-py against the world in ../wit; the
`wit_world` modules are the bindings componentize-py generates for that world.
"""

from urllib.parse import parse_qs

from componentize_py_types import Ok
from wit_world import exports
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    Method,
    Method_Connect,
    Method_Delete,
    Method_Get,
    Method_Head,
    Method_Options,
    Method_Other,
    Method_Patch,
    Method_Post,
    Method_Put,
    Method_Trace,
    OutgoingBody,
    OutgoingResponse,
    ResponseOutparam,
)

METHODS = {
    Method_Get: "GET",
    Method_Head: "HEAD",
    Method_Post: "POST",
    Method_Put: "PUT",
    Method_Delete: "DELETE",
    Method_Connect: "CONNECT",
    Method_Options: "OPTIONS",
    Method_Trace: "TRACE",
    Method_Patch: "PATCH",
}

# `blocking-write-and-flush` takes at most this many bytes a call.
MAX_WRITE = 4096


def method_name(method: Method) -> str:
    if isinstance(method, Method_Other):
        return method.value
    return METHODS[type(method)]


def page(method: str, path: str) -> bytes | None:
    """The HTML `GET /page?html=HTML` asks for, if that is the request."""
    route, _, query = path.partition("?")
    if method != "GET" or route != "/page":
        return None
    html = parse_qs(query).get("html")
    return html[0].encode() if html else None


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: IncomingRequest, response_out: ResponseOutparam) -> None:
        path = request.path_with_query() or "/"
        method = method_name(request.method())
        html = page(method, path)
        if html is None:
            content_type, text = b"text/plain", f"Hello from Python: {method} {path}\n".encode()
        else:
            content_type, text = b"text/html; charset=utf-8", html
        response = OutgoingResponse(Fields.from_list([("content-type", content_type)]))
        response.set_status_code(200)
        body = response.body()
        ResponseOutparam.set(response_out, Ok(response))
        # Leaving the `with` drops the stream, which must go before its body is finished.
        with body.write() as stream:
            for start in range(0, len(text), MAX_WRITE):
                stream.blocking_write_and_flush(text[start : start + MAX_WRITE])
        OutgoingBody.finish(body, None)
