// http-js: a wasi:http/proxy component written in JavaScript, as componentize-js builds it: a
// `fetch` event listener, which StarlingMonkey (the engine inside the component) calls for each
// request that `wasi:http/incoming-handler.handle` brings, with web `Request`s and `Response`s
// over the request's and response's streams.
//
// Routes, by the request's path (the path after /v1/invoke/NAME, or after a route's base):
// - `/echo`: the request body streamed back as it arrives, with the request's content-type.
// - `/status/NNN`: an empty response with status NNN (200 to 599), or 400.
// - `/stream?bytes=N`: N bytes of `abcdefghijklmnopqrstuvwxyz0123456789\n` repeated, made 64 KiB
//   at a time as the client reads them.
// - anything else: `Hello from JavaScript: <METHOD> <path-with-query>\n`.
// scripts/js-component builds it; it is a test fixture that no example deploys.

const PATTERN = new TextEncoder().encode('abcdefghijklmnopqrstuvwxyz0123456789\n');
const CHUNK = 64 * 1024;

addEventListener('fetch', (event) => event.respondWith(handle(event.request)));

function handle(request) {
  const url = new URL(request.url);
  if (url.pathname === '/echo') {
    const headers = new Headers();
    const type = request.headers.get('content-type');
    if (type !== null) {
      headers.set('content-type', type);
    }
    return new Response(request.body, { headers });
  }
  const status = url.pathname.match(/^\/status\/(\d+)$/);
  if (status !== null) {
    const code = Number(status[1]);
    if (code >= 200 && code <= 599) {
      return new Response(null, { status: code });
    }
    return text(400, `not a final HTTP status (200 to 599): ${status[1]}\n`);
  }
  if (url.pathname === '/stream') {
    const bytes = url.searchParams.get('bytes') ?? '';
    if (!/^\d+$/.test(bytes)) {
      return text(400, `/stream needs ?bytes=N, a count of bytes: ${bytes}\n`);
    }
    return new Response(pattern(BigInt(bytes)), {
      headers: { 'content-type': 'text/plain' },
    });
  }
  return text(200, `Hello from JavaScript: ${request.method} ${url.pathname}${url.search}\n`);
}

function text(status, body) {
  return new Response(body, { status, headers: { 'content-type': 'text/plain' } });
}

// PATTERN repeated over CHUNK bytes and one PATTERN more, so that a chunk starting at any offset
// into the pattern is a slice of it. Made once, when componentize-js snapshots the engine: the
// engine interprets JavaScript, and a loop over each byte of a chunk makes a few MB/s.
const REPEATED = new Uint8Array(CHUNK + PATTERN.length);
for (let i = 0; i < REPEATED.length; i++) {
  REPEATED[i] = PATTERN[i % PATTERN.length];
}

// `total` bytes of PATTERN repeated, one chunk of at most CHUNK bytes each time the reader pulls,
// so the whole body is never in memory. A BigInt, as a count of bytes may pass 2^53.
function pattern(total) {
  let sent = 0n;
  return new ReadableStream({
    pull(controller) {
      if (sent === total) {
        controller.close();
        return;
      }
      const left = total - sent;
      const size = left < BigInt(CHUNK) ? Number(left) : CHUNK;
      const offset = Number(sent % BigInt(PATTERN.length));
      sent += BigInt(size);
      // A copy: the stream holds the chunk until the host has written it.
      controller.enqueue(REPEATED.slice(offset, offset + size));
    },
  });
}
