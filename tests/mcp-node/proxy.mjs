// A header-adding proxy for the conformance suite, which cannot send an Authorization header:
// listens on loopback and forwards every request to `somna mcp --http` unchanged (method,
// path, headers, body, streamed both ways) with `Authorization: Bearer TOKEN` added. somna
// keeps checking Host and Origin itself: the proxy passes them on as the client sent them.
import http from "node:http";

/**
 * Starts the proxy on a free loopback port; resolves to the server and its port. `target()` is
 * the address to forward to (`127.0.0.1:PORT`), asked at each request, so that the server may
 * start after the proxy (and allow the proxy's origin).
 */
export function startProxy(target, token) {
  const server = http.createServer((req, res) => {
    const [host, port] = target().split(":");
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const up = http.request({ host, port, method: req.method, path: req.url, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(up);
    res.on("close", () => up.destroy());
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve({ server, port: server.address().port }));
  });
}
