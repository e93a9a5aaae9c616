// Decides, for one request, where a secret's placeholder may become its value, and does it.
// The value goes into a request only when all of these hold:
//   - the proxy terminated TLS for the connection (never over plain HTTP);
//   - the destination dialled (the CONNECT host), the TLS server name (SNI) and the request's
//     Host / :authority are the same host, and that host is listed for the secret;
//   - the placeholder sits where the secret's `inject` rules say: Authorization Bearer/token,
//     inside Authorization Basic's base64 user:password, or a named header.
// Never in the URL and never in a body. A placeholder seen anywhere on its way to a destination
// that is not allowed to receive the value refuses the whole request, so the attempt is
// visible; where the destination is allowed but the place is not, it travels as it is (a
// placeholder is worth nothing). What was put in is also what responses are scrubbed of.

import type { Replacement } from "../util/scrubber.js";
import type { SecretBinding } from "./secret-bindings.js";

export interface RequestOrigin {
  /** Whether the proxy terminated TLS for this request (false for plain-HTTP proxy requests). */
  tls: boolean;
  /** The canonical host that was resolved and dialled (the CONNECT target, or the URL's host). */
  host: string;
  /** The port the client asked for (before any test-only remapping). */
  port: number;
  /** The TLS server name the client sent, canonical; undefined when it sent none. */
  sni?: string;
  /** The request's Host header or :authority, as sent. */
  authority?: string;
}

export type HeaderValue = string | string[];

type Rewrite =
  | { refused?: undefined; headers: Record<string, HeaderValue>; injected: string[]; scrub: Replacement[] }
  | { refused: { secret: string; reason: string }; headers?: undefined; injected?: undefined; scrub?: undefined };

class Refusal {
  constructor(
    readonly secret: string,
    readonly reason: string,
  ) {}
}

export function rewriteRequest(
  target: string,
  headers: Record<string, HeaderValue | undefined>,
  origin: RequestOrigin,
  bindings: readonly SecretBinding[],
  canonical: (host: string) => string | undefined,
): Rewrite {
  const present = bindings.filter((b) => mentions(target, headers, b.placeholder));
  if (present.length === 0) return { headers: definedOnly(headers), injected: [], scrub: [] };
  const refusal = (b: SecretBinding) => {
    const reason = whyNot(b, origin, canonical);
    return reason ? new Refusal(b.name, reason) : undefined;
  };
  try {
    for (const b of present) {
      if (target.includes(b.placeholder) || safeDecode(target).includes(b.placeholder)) {
        const refused = refusal(b);
        if (refused) throw refused;
      }
    }
    const injected = new Set<string>();
    const scrub: Replacement[] = [];
    const out: Record<string, HeaderValue> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      const rewrite = (v: string) => {
        const next = rewriteValue(name.toLowerCase(), v, present, refusal);
        if (next.value !== v) {
          for (const n of next.injected) injected.add(n);
          scrub.push({ find: next.value, replace: v });
        }
        return next.value;
      };
      out[name] = Array.isArray(value) ? value.map(rewrite) : rewrite(value);
    }
    for (const b of present.filter((p) => injected.has(p.name))) {
      scrub.push({ find: b.value, replace: b.placeholder });
      scrub.push({ find: base64(b.value), replace: base64(b.placeholder) });
    }
    return { headers: out, injected: [...injected], scrub };
  } catch (error) {
    if (error instanceof Refusal) return { refused: { secret: error.secret, reason: error.reason } };
    throw error;
  }
}

/** Why a binding's value may not go to this request's destination, or undefined when it may. */
function whyNot(b: SecretBinding, origin: RequestOrigin, canonical: (host: string) => string | undefined) {
  const listed = b.hosts.join(", ");
  if (!b.hosts.includes(origin.host)) {
    return `the request to ${origin.host} carries the placeholder of secret ${b.name}, which may only be sent to ${listed}`;
  }
  if (!origin.tls) return `secret ${b.name} is only sent over HTTPS, and this request to ${origin.host} is plain HTTP`;
  if (origin.sni !== origin.host) {
    return `secret ${b.name}: the TLS server name (${origin.sni ?? "none"}) is not the host dialled (${origin.host})`;
  }
  const authority = parseAuthorityHeader(origin.authority, canonical);
  if (authority?.host !== origin.host || (authority.port !== undefined && authority.port !== origin.port)) {
    return `secret ${b.name}: the Host header (${String(origin.authority).slice(0, 100)}) is not the host dialled (${origin.host}:${origin.port})`;
  }
  return undefined;
}

function rewriteValue(
  name: string,
  value: string,
  present: readonly SecretBinding[],
  refusal: (b: SecretBinding) => Refusal | undefined,
): { value: string; injected: string[] } {
  const injected: string[] = [];
  const swap = (text: string, allowed: (b: SecretBinding) => boolean) => {
    let out = text;
    for (const b of present) {
      if (!out.includes(b.placeholder)) continue;
      const refused = refusal(b);
      if (refused) throw refused;
      if (!allowed(b)) continue;
      out = out.split(b.placeholder).join(b.value);
      injected.push(b.name);
    }
    return out;
  };
  const rule = (b: SecretBinding, kind: "bearer" | "basic") => b.inject.some((r) => r.kind === kind);
  const header = (b: SecretBinding) => b.inject.some((r) => r.kind === "header" && r.header.toLowerCase() === name);

  if (name === "authorization" || name === "proxy-authorization") {
    const match = /^(\S+)(\s+)(.*)$/s.exec(value);
    const scheme = match?.[1]?.toLowerCase();
    if (match && scheme === "basic") {
      const decoded = decodeBase64(match[3]!);
      if (decoded !== undefined && present.some((b) => decoded.includes(b.placeholder))) {
        const swapped = swap(decoded, (b) => name === "authorization" && rule(b, "basic"));
        return { value: `${match[1]}${match[2]}${base64(swapped)}`, injected };
      }
    }
    if (match && (scheme === "bearer" || scheme === "token")) {
      const swapped = swap(match[3]!, (b) => name === "authorization" && rule(b, "bearer"));
      return { value: `${match[1]}${match[2]}${swapped}`, injected };
    }
  }
  return { value: swap(value, header), injected };
}

function mentions(target: string, headers: Record<string, HeaderValue | undefined>, placeholder: string): boolean {
  if (target.includes(placeholder) || safeDecode(target).includes(placeholder)) return true;
  for (const value of Object.values(headers)) {
    for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
      if (v.includes(placeholder)) return true;
      // Inside Basic credentials the placeholder is base64: look there too.
      const basic = /^basic\s+(\S+)\s*$/i.exec(v);
      if (basic && decodeBase64(basic[1]!)?.includes(placeholder)) return true;
    }
  }
  return false;
}

function parseAuthorityHeader(
  authority: string | undefined,
  canonical: (host: string) => string | undefined,
): { host: string; port?: number } | undefined {
  if (authority === undefined) return undefined;
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!match) return undefined;
  const host = canonical(match[1]!);
  return host === undefined ? undefined : { host, port: match[2] === undefined ? undefined : Number(match[2]) };
}

function decodeBase64(text: string): string | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) return undefined;
  return Buffer.from(trimmed, "base64").toString("latin1");
}

const base64 = (text: string) => Buffer.from(text, "latin1").toString("base64");

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function definedOnly(headers: Record<string, HeaderValue | undefined>): Record<string, HeaderValue> {
  const out: Record<string, HeaderValue> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name] = value;
  return out;
}
