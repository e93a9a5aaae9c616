// Secrets at the egress proxy: for a CONNECT to a secret's host (port 443), TLS is terminated
// with the run's CA (tls-terminator.ts), each request's headers get the value in place of the
// placeholder where header-rewriter.ts allows it, the request goes on over the proxy's own
// verified HTTPS connection to the checked address (upstream-client.ts), and the answer comes
// back scrubbed of every secret's value (util/scrubber.ts). Other hosts keep plain tunnels.
import type http from "node:http";
import type http2 from "node:http2";
import type net from "node:net";
import { pipeline, type Readable, type Transform } from "node:stream";
import { connectionTokens, HOP_BY_HOP_HEADERS } from "../http/hop-by-hop-headers.js";
import { http1RequestHasBody } from "../http/request-framing.js";
import { codings, decoderFor, MAX_CODING_LAYERS } from "../util/content-codings.js";
import { canonicalHost } from "../util/host-name.js";
import { headerForms, type Replacement, ScrubStream, scrubText, secretForms } from "../util/scrubber.js";
import { HostCertificates } from "./cert-cache.js";
import type { EgressDecision, Interception, TunnelTarget } from "./egress-proxy.js";
import { type HeaderValue, rewriteRequest } from "./header-rewriter.js";
import { refusalBody } from "./http-refusal.js";
import type { RunCa } from "./run-ca.js";
import type { SecretBinding } from "./secret-bindings.js";
import { type TerminatedRequest, type TerminatedResponse, type TlsSession, terminateTls } from "./tls-terminator.js";
import { createUpstream, type Upstream } from "./upstream-client.js";

const SECRET_PORT = 443;

interface SecretInterceptionOptions {
  bindings: readonly SecretBinding[];
  ca: RunCa;
  /** Roots the upstream's certificate is checked against; undefined: Node's defaults. */
  upstreamCa?: string[];
  connectTimeoutMs?: number;
}

const canonical = (host: string) => canonicalHost(host).host;

// One closure on purpose: the run's scrub list, certificates and upstreams are shared by every
// terminated connection and closed together.
export function createSecretInterception(options: SecretInterceptionOptions): Interception {
  const { bindings } = options;
  const certificates = new HostCertificates(options.ca);
  const upstreams = new Set<Upstream>();
  // Whatever the request, no answer may carry a value (or its base64, at any alignment) back into the sandbox.
  const runScrub: Replacement[] = bindings.flatMap((b) => secretForms(b.value, b.placeholder));

  return {
    terminates: (host, port) => port === SECRET_PORT && bindings.some((b) => b.hosts.includes(host)),

    terminate(client: net.Socket, target: TunnelTarget, report: (d: EgressDecision) => void) {
      let upstream: Upstream | undefined;
      const injectedOnce = new Set<string>();
      terminateTls(client, {
        certificate: certificates.for(target.host),
        onClose: () => {
          if (upstream) upstreams.delete(upstream);
          upstream?.close();
        },
        onRequest: (req, res, session) => {
          if (!upstream) {
            upstream = createUpstream(
              { ...target, ca: options.upstreamCa, connectTimeoutMs: options.connectTimeoutMs ?? 15_000 },
              session.protocol === "h2",
            );
            upstreams.add(upstream);
          }
          forwardRequest(req, res, session, {
            target,
            upstream,
            report,
            onInjected: (name) => {
              if (injectedOnce.has(name)) return false;
              injectedOnce.add(name);
              return true;
            },
          });
        },
      });
    },

    refusePlain(url: string, headers: http.IncomingHttpHeaders) {
      const parsed = URL.canParse(url) ? new URL(url) : undefined;
      const host = canonical(parsed?.hostname ?? "") ?? "";
      const port = Number(parsed?.port || 80);
      const verdict = rewriteRequest(url, headers, { tls: false, host, port }, bindings, canonical);
      return verdict.refused;
    },

    close() {
      for (const upstream of upstreams) upstream.close();
      upstreams.clear();
    },
  };

  function forwardRequest(
    req: TerminatedRequest,
    res: TerminatedResponse,
    session: TlsSession,
    ctx: {
      target: TunnelTarget;
      upstream: Upstream;
      report: (d: EgressDecision) => void;
      onInjected: (name: string) => boolean;
    },
  ): void {
    const { target } = ctx;
    const method = req.method ?? "GET";
    const path = req.url ?? "";
    const authority = String(req.headers[":authority"] ?? req.headers.host ?? "");
    // `port` is the port the sandbox asked for (443); report() fills it in.
    const base = { host: target.host, port: SECRET_PORT, method };
    // An absolute-form target (`GET https://elsewhere/ HTTP/1.1`) names an authority of its own,
    // which a front end may route by instead of Host (RFC 9112 §3.2.2), and the checks below
    // judge Host: only origin-form targets go on.
    if (!isOriginForm(method, path)) {
      const reason = `only origin-form request targets (/path, not //path) are forwarded to ${target.host}, not ${JSON.stringify(path.slice(0, 100))}`;
      ctx.report({ action: "denied", ...base, reason });
      req.resume();
      answer(res, 400, reason);
      return;
    }
    const verdict = rewriteRequest(
      path,
      forwardableHeaders(req.headers),
      { tls: true, host: target.host, port: SECRET_PORT, sni: session.sni, authority: authority || undefined },
      bindings,
      canonical,
    );
    if (verdict.refused) {
      ctx.report({ action: "denied", ...base, reason: verdict.refused.reason, secret: verdict.refused.secret });
      req.resume();
      answer(res, 403, verdict.refused.reason);
      return;
    }
    for (const name of verdict.injected) {
      if (ctx.onInjected(name)) {
        ctx.report({ action: "injected", ...base, reason: `${name} put into the request's headers`, secret: name });
      }
    }
    // Ask for an uncompressed answer: the scrubber finds the value only in the forms it knows (literal, escaped, base64), not compressed.
    const headers = { ...verdict.headers, "accept-encoding": "identity" };
    // Each header value the proxy produced, also without its scheme (a bare Basic credential).
    const scrub = [...verdict.scrub.flatMap((r) => headerForms(r.find, r.replace)), ...runScrub];
    const failed = (reason: string) => ctx.report({ action: "failed", ...base, reason });
    // HTTP/2 says whether a body follows (no END_STREAM on the headers), HTTP/1.x by its framing headers.
    const hasBody =
      req.httpVersionMajor === 2
        ? !(req as http2.Http2ServerRequest).stream.endAfterHeaders
        : http1RequestHasBody(req.headers);
    ctx.upstream.request({ method, path, authority: authority || target.host, headers, body: req, hasBody }).then(
      (response) => {
        // Inside a promise's callback a throw would be an unhandled rejection, which ends the process.
        try {
          relayResponse(res, method, response, scrub, failed);
        } catch (error) {
          response.body.destroy();
          const reason = `the answer of ${target.host} could not be relayed (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
          failed(reason);
          // A response keeps the headers its writeHead refused: then only a reset is left.
          try {
            answer(res, 502, reason);
          } catch {
            res.destroy();
          }
        }
      },
      (error: NodeJS.ErrnoException) => {
        // EBUSY: the tunnel's own bound on requests in flight (upstream-client.ts).
        const busy = error.code === "EBUSY";
        const reason = busy
          ? error.message
          : `could not reach ${target.host}:${SECRET_PORT} (${error.code ?? error.message})`;
        ctx.report({ action: "failed", ...base, reason, address: target.address });
        answer(res, busy ? 503 : 502, reason);
      },
    );
  }
}

function relayResponse(
  res: TerminatedResponse,
  method: string,
  response: { status: number; headers: Record<string, HeaderValue>; body: Readable },
  scrub: Replacement[],
  onFailure: (reason: string) => void,
): void {
  // Only a final status an HTTP/1.1 and an HTTP/2 response can both carry (HTTP/2 refuses the rest).
  if (response.status < 200 || response.status > 599) {
    response.body.destroy();
    const reason = `the upstream answered with status ${response.status}, which is not relayed`;
    onFailure(reason);
    answer(res, 502, reason);
    return;
  }
  // Connection-specific headers are the upstream connection's own (and HTTP/2 refuses them).
  const connection = connectionTokens(response.headers);
  const headers: Record<string, HeaderValue> = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (HOP_BY_HOP_HEADERS.has(name) || connection.has(name)) continue;
    headers[name] = Array.isArray(value) ? value.map((v) => scrubText(v, scrub)) : scrubText(value, scrub);
  }
  const bodiless = method === "HEAD" || response.status === 204 || response.status === 304;
  if (bodiless) {
    (res as http.ServerResponse).writeHead(response.status, headers);
    response.body.resume();
    return void res.end();
  }
  // What the body went through, outermost last: its content codings, then its transfer codings
  // (HTTP/1.1 `Transfer-Encoding: gzip, chunked`: Node undoes `chunked` only, the gzip stays).
  const content = codings(headers["content-encoding"]);
  const transfer = codings(response.headers["transfer-encoding"]).filter((c) => c !== "chunked");
  if (transfer.length + content.length > MAX_CODING_LAYERS) {
    response.body.destroy();
    const reason = `the upstream answered with ${transfer.length + content.length} codings, more than the ${MAX_CODING_LAYERS} undone to scrub a body of secrets`;
    onFailure(reason);
    answer(res, 502, reason);
    return;
  }
  const decoders = [...transfer, ...content].reverse().map((coding) => ({ coding, decoder: decoderFor(coding) }));
  const unknown = decoders.find((d) => d.decoder === null);
  if (unknown) {
    response.body.destroy();
    const which = transfer.includes(unknown.coding) ? "transfer-encoding" : "content-encoding";
    const reason = `the upstream answered with ${which} ${unknown.coding.slice(0, 40)}, which cannot be scrubbed of secrets`;
    onFailure(reason);
    answer(res, 502, reason);
    return;
  }
  // Scrubbing may change the length; the framing is left to the HTTP layer (chunked or h2 frames).
  delete headers["content-length"];
  if (content.length > 0) delete headers["content-encoding"];
  (res as http.ServerResponse).writeHead(response.status, headers);
  const stages: Array<Readable | Transform | NodeJS.WritableStream> = [response.body];
  for (const { decoder } of decoders) if (decoder) stages.push(decoder);
  stages.push(new ScrubStream(scrub), res as http.ServerResponse);
  pipeline(stages as unknown as [Readable, NodeJS.WritableStream], (error) => {
    if (error) res.destroy();
  });
}

/**
 * Headers a front end or framework may take the request's authority, URL or client from instead of
 * its target and Host (a CDN in front of the secret's host, a reverse proxy honouring
 * X-Forwarded-Host): they never travel with an injected secret (review, session 44), as the
 * gateway relays none beside a provider key (docs/security.md N8).
 */
const ROUTING_HEADERS: ReadonlySet<string> = new Set([
  "forwarded",
  "x-forwarded-host",
  "x-forwarded-server",
  "x-forwarded-port",
  "x-forwarded-proto",
  "x-forwarded-scheme",
  "x-forwarded-prefix",
  "x-forwarded-uri",
  "x-forwarded-path",
  "x-forwarded-for",
  "x-real-ip",
  "x-original-url",
  "x-original-uri",
  "x-original-host",
  "x-rewrite-url",
  "x-host",
  "x-http-host-override",
]);

/**
 * The request's headers minus HTTP/2 pseudo-headers, Host, hop-by-hop headers and those its
 * Connection header names, routing headers (ROUTING_HEADERS), and Expect (the sandbox's client
 * already had its 100 Continue from the terminator).
 */
function forwardableHeaders(incoming: http.IncomingHttpHeaders): Record<string, HeaderValue | undefined> {
  const named = connectionTokens(incoming);
  const out: Record<string, HeaderValue | undefined> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (name.startsWith(":") || name === "host" || name === "expect") continue;
    if (HOP_BY_HOP_HEADERS.has(name) || named.has(name) || ROUTING_HEADERS.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * Origin-form (`/path?query`), or `*` for a server-wide OPTIONS. `//host/x` and `/\host/x` are valid
 * paths, but a front end that parses a target as a URL (a WHATWG parser reads `\` as `/`) takes them
 * for scheme-relative references naming another authority: refused as well.
 */
function isOriginForm(method: string, target: string): boolean {
  if (target === "*") return method === "OPTIONS";
  return target.startsWith("/") && !/^.[/\\]/.test(target);
}

function answer(res: TerminatedResponse, status: number, reason: string): void {
  if (res.headersSent) return void res.destroy();
  const body = refusalBody(reason);
  (res as http.ServerResponse).writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}
